"""Signal rules of earlier schemas to v0.5 (spec 5.2, 6.6): renamed fields, and each removed type's replacement.

``rewrite_signals`` returns the new ``signals`` block and a ``Renames`` table
that the condition trees and projections of the same recipe read, so a
condition follows its rule to its new type, name and label.
"""
from __future__ import annotations

import re
from typing import Any

from .notes import Notes

# The feedback preset's options (spec 5.1) by the v0.4 rule names that meant them.
FEEDBACK_LABELS = {"satisfied": "SAT", "sat": "SAT", "need_clarification": "NEED_CLARIFICATION",
                   "wrong_answer": "WRONG_ANSWER", "want_different": "WANT_DIFFERENT", "no_feedback": "NO_FEEDBACK"}
# v0.4's modality rule names (the AR / DIFFUSION / BOTH routes) as the modality preset's options.
MODALITY_LABELS = {"ar": "text", "diffusion": "image", "both": "text_image", "text": "text", "image": "image"}
# Words of a v0.4 rule name that say which preset option it meant, when the name is not an option itself.
HINTS = {"user_feedbacks": (("incorrect", "WRONG_ANSWER"), ("wrong", "WRONG_ANSWER"), ("clarif", "NEED_CLARIFICATION"),
                            ("different", "WANT_DIFFERENT"), ("satisf", "SAT")),
         "modality": (("diffusion", "image"), ("image", "image"), ("both", "text_image"))}
ACTION_OPTIONS = {"generate": "Create something new.", "explain": "Explain or describe something.",
                  "fix": "Fix a problem or a bug.", "refactor": "Restructure existing work without changing it.",
                  "test": "Write or run tests.", "other": "Anything else."}
# A pattern per UTF-8 length step: a character matches once for each byte it takes, so the number of
# matches over the four is the current turn's UTF-8 byte length (spec 5.2, structure on text_bytes).
UTF8_BYTE_PATTERNS = [r"[\x00-\U0010FFFF]", r"[\u0080-\U0010FFFF]", r"[\u0800-\U0010FFFF]", r"[\U00010000-\U0010FFFF]"]


class Renames:
    """(old condition type, old name) -> the new leaf, or False for a rule v0.5 never matches."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], dict | bool] = {}

    def set(self, old_type: str, old_name: str, new: dict | bool) -> None:
        self.table[(old_type, old_name)] = new

    def leaf(self, leaf: dict, path: str, notes: Notes) -> dict | bool:
        """The v0.5 form of one condition leaf (and of a projection input, which has the same keys)."""
        type_, name = str(leaf.get("type")), str(leaf.get("name"))
        base, _, label = name.partition(":")
        for key in ((type_, name), (type_, base)):
            new = self.table.get(key)
            if new is False:
                notes.drop(path, f"{type_} condition {name!r} is false in v0.5 (its rule was dropped); "
                                 "the tree was simplified")
                return False
            if isinstance(new, dict):
                out = {**leaf, **new}
                if key == (type_, base) and label and "label" not in new:
                    out["label"] = label
                if out != leaf:
                    notes.rewrite(path, f"{type_}/{name} became {out['type']}/{out['name']}"
                                        + (f" label {out['label']}" if out.get("label") else ""))
                return out
        if type_ == "decision":
            notes.rewrite(f"{path}.type", "decision conditions are systemone conditions")
            return {**leaf, "type": "systemone"}
        if type_ == "kb" or type_ == "kb_metric":
            notes.drop(path, "kb conditions never match in v0.5 (no signal reads a knowledge base); false")
            return False
        return leaf


def rewrite_signals(signals: Any, where: str, notes: Notes, renames: Renames,
                    labels: dict[str, tuple[str, ...]] | None = None) -> dict:
    """The v0.5 ``signals`` block of one recipe; ``labels`` are the preset labels this router knows (pii, domain)."""
    if not isinstance(signals, dict):
        return {}
    dest = _Out(labels or {})

    for kind, rules in signals.items():
        for i, rule in enumerate(rules or []):
            if not isinstance(rule, dict):
                continue
            name = rule.get("name", i)
            path = f"{where}.{kind}[{name}]"
            handler = _HANDLERS.get(kind)
            if handler is None:
                dest.add(kind, dict(rule))
            else:
                handler(dict(rule), path, notes, renames, dest)
    return dest.rules


def _predicate(rule: dict, path: str, notes: Notes, key: str = "threshold") -> dict | None:
    if key not in rule:
        return None
    value = rule.pop(key)
    notes.review(f"{path}.{key}", f"threshold {value} became predicate {{gte: {value}}}; the decision model's "
                                  "scale differs from the classifier's, so re-fit it")
    return {"gte": value}


def _keep_common(rule: dict) -> dict:
    return {k: rule[k] for k in ("name", "description") if k in rule}


def _keywords(rule, path, notes, renames, dest):
    if rule.pop("fuzzy_match", None):
        rule.setdefault("method", "fuzzy")
        notes.rewrite(f"{path}.fuzzy_match", "fuzzy_match: true became method: fuzzy")
    t = rule.get("fuzzy_threshold")
    if isinstance(t, (int, float)) and t > 8:
        # v0.4 read a similarity percentage; v0.5 reads the largest edit distance that still matches.
        rule["fuzzy_threshold"] = max(1, min(8, round((100 - t) / 10)))
        notes.review(f"{path}.fuzzy_threshold", f"fuzzy_threshold {t} (a similarity percentage) became an edit "
                                                f"distance of {rule['fuzzy_threshold']}; check it on your keywords")
    dest.add("keywords", rule)


def _language(rule, path, notes, renames, dest):
    if "threshold" in rule:
        value = rule.pop("threshold")
        if value:
            rule["min_confidence"] = value
        notes.rewrite(f"{path}.threshold", f"threshold {value} became min_confidence" if value else
                      "threshold 0 dropped (min_confidence takes the default)")
    dest.add("language", rule)


def _domains(rule, path, notes, renames, dest):
    if "mmlu_categories" in rule:
        rule["labels"] = rule.pop("mmlu_categories")
        notes.rewrite(f"{path}.mmlu_categories", "mmlu_categories became labels")
    _known_labels(rule, "labels", dest.labels.get("domain"), "domain", path, notes)
    if "threshold" in rule:
        rule["predicate"] = _predicate(rule, path, notes)
    dest.add("domains", rule)


def _known_labels(rule: dict, key: str, known: tuple[str, ...] | None, preset: str, path: str, notes: Notes) -> None:
    """Drop the labels the preset does not have (v0.4's detectors had others), with a note naming them."""
    if not known or not isinstance(rule.get(key), list):
        return
    unknown = [x for x in rule[key] if x not in known]
    if unknown:
        rule[key] = [x for x in rule[key] if x in known]
        if not rule[key]:
            del rule[key]
        notes.review(f"{path}.{key}", f"{', '.join(map(str, unknown))} dropped: not labels of preset {preset} "
                                      f"({', '.join(known)})")


def _jailbreak(rule, path, notes, renames, dest):
    if "threshold" in rule:
        rule["predicate"] = _predicate(rule, path, notes)
    if "include_history" in rule:
        rule.setdefault("input", {})["history"] = bool(rule.pop("include_history"))
        notes.rewrite(f"{path}.include_history", "include_history became input.history")
    for key in ("method", "jailbreak_patterns", "benign_patterns"):
        if key in rule:
            rule.pop(key)
            notes.drop(f"{path}.{key}", f"{key} dropped: the jailbreak preset asks the decision model, which needs "
                                        "no detector method or example patterns")
    if rule.pop("on_error", None) == "block":
        rule["on_unknown"] = "match"
        notes.rewrite(f"{path}.on_error", "on_error: block became on_unknown: match (fail closed)")
    dest.add("jailbreak", rule)


def _pii(rule, path, notes, renames, dest):
    if "threshold" in rule:
        rule["predicate"] = _predicate(rule, path, notes)
    if "pii_types_allowed" in rule:
        rule["ignore_labels"] = rule.pop("pii_types_allowed")
        notes.rewrite(f"{path}.pii_types_allowed", "pii_types_allowed became ignore_labels")
    _known_labels(rule, "ignore_labels", dest.labels.get("pii"), "pii", path, notes)
    if "include_history" in rule:
        rule.setdefault("input", {})["history"] = bool(rule.pop("include_history"))
        notes.rewrite(f"{path}.include_history", "include_history became input.history")
    dest.add("pii", rule)


def _safety(rule, path, notes, renames, dest):
    out = {k: v for k, v in rule.items() if k not in ("unsafe_labels", "threshold", "labels")}
    labels = [lbl for lbl in (rule.get("labels") or []) if lbl not in ("safe", "unsafe")]
    if labels:
        out["labels"] = labels
    if "threshold" in rule:
        out["predicate"] = _predicate(rule, path, notes)
    if rule.get("unsafe_labels"):
        notes.rewrite(f"{path}.unsafe_labels", "unsafe_labels dropped: a safety rule without labels matches the "
                                               "harm preset's unsafe option")
    if rule.get("labels") and not labels:
        notes.rewrite(f"{path}.labels", "labels [safe, unsafe] dropped: they are the harm preset's own options")
    dest.add("safety", out)


def _labelled(kind: str, table: dict[str, str]):
    def handler(rule, path, notes, renames, dest):
        if "labels" not in rule:
            name = str(rule.get("name", "")).lower()
            label = table.get(name)
            hinted = next((lbl for word, lbl in HINTS.get(kind, ()) if word in name), None)
            if label is not None:
                rule["labels"] = [label]
                notes.rewrite(path, f"the v0.4 rule name {rule['name']!r} became labels: [{label}]")
            elif hinted is not None:
                rule["labels"] = [hinted]
                notes.review(path, f"labels: [{hinted}] inferred from the rule's name {rule['name']!r}: check it")
            else:
                notes.review(path, f"{rule.get('name')!r} names no option of the preset; conditions on it must name "
                                   f"a label ({', '.join(sorted(set(table.values())))})")
        if "threshold" in rule:
            rule["predicate"] = _predicate(rule, path, notes)
        dest.add(kind, rule)
    return handler


def _complexity(rule, path, notes, renames, dest):
    out = {k: v for k, v in rule.items() if k not in ("threshold", "easy", "hard", "composer")}
    dropped = [k for k in ("threshold", "easy", "hard", "composer") if k in rule]
    if dropped:
        notes.review(path, f"{', '.join(dropped)} dropped: the complexity preset asks the decision model for "
                           "easy, medium or hard, with no example banks; conditions name the level as label")
    dest.add("complexity", out)
    renames.set("complexity", str(rule.get("name")), {"type": "complexity", "name": rule.get("name")})


def _reasks(rule, path, notes, renames, dest):
    out = _keep_common(rule)
    out["labels"] = ["reask"]
    turns = rule.get("lookback_turns")
    if turns is not None:
        out["input"] = {"previous_turns": min(32, 2 * int(turns))}
    notes.rewrite(path, "reasks became a turn_relation rule over reask"
                        + (f"; lookback_turns {turns} (user turns) became previous_turns {2 * int(turns)} "
                           "(user and assistant turns)" if turns is not None else ""))
    if "threshold" in rule:
        notes.review(f"{path}.threshold", "threshold has no counterpart: the decision model tells a re-ask from "
                                          "the turns themselves")
    dest.add("turn_relation", out)
    renames.set("reask", str(rule.get("name")), {"type": "turn_relation", "name": rule.get("name")})


def _topic_continuity(rule, path, notes, renames, dest):
    out = _keep_common(rule)
    out["labels"] = ["continue", "shift"]
    notes.rewrite(path, "topic_continuity became a turn_relation rule over continue and shift")
    dest.add("turn_relation", out)
    renames.set("topic_continuity", str(rule.get("name")), {"type": "turn_relation", "name": rule.get("name")})


def _question(q: dict) -> dict:
    """A v0.4 question block as v0.5's: choices, levels and labels become criteria."""
    out = {k: q[k] for k in ("type", "instructions", "head") if k in q}
    if q.get("type") == "noul":
        return out
    for key in ("choices", "labels"):
        items = q.get(key)
        if isinstance(items, list):
            out["criteria"] = {str(i["key"]) if isinstance(i, dict) else str(i):
                               (i.get("description", "") if isinstance(i, dict) else "") for i in items}
    if isinstance(q.get("levels"), list):
        out["criteria"] = [str(x) for x in q["levels"]]
    if isinstance(q.get("criteria"), (dict, list)):
        out["criteria"] = q["criteria"]
    return out


def _decision(rule, path, notes, renames, dest):
    notes.rewrite(path, "the decision signal is the systemone signal")
    renames.set("decision", str(rule.get("name")), {"type": "systemone", "name": rule.get("name")})
    if isinstance(rule.get("question"), dict):
        rule["question"] = _question(rule["question"])
    dest.add("systemone", rule)


def _systemone(rule, path, notes, renames, dest):
    if isinstance(rule.get("question"), dict):
        rule["question"] = _question(rule["question"])
    dest.add("systemone", rule)


def _embeddings(rule, path, notes, renames, dest):
    out = _keep_common(rule)
    examples = [str(c) for c in rule.get("candidates") or []]
    if rule.get("query_modality") == "image":
        out["input"] = {"image": True}
    quoted = "; ".join(f'"{e}"' for e in examples)
    out["question"] = {"type": "noul", "instructions": f"Is this request like any of these examples: {quoted}?"}
    if "threshold" in rule:
        out["predicate"] = {"gte": rule["threshold"]}
    notes.review(path, "the embeddings rule became a systemone yes/no question quoting its examples"
                       + (f"; threshold {rule['threshold']} (a cosine) became predicate gte, a probability: re-fit"
                          if "threshold" in rule else ""))
    dest.add("systemone", out)
    renames.set("embedding", str(rule.get("name")), {"type": "systemone", "name": rule.get("name")})


def _choice_rule(name: str, description: str | None, instructions: str, options: dict[str, str]) -> dict:
    rule: dict[str, Any] = {"name": name}
    if description:
        rule["description"] = description
    rule["question"] = {"type": "choice", "instructions": instructions, "criteria": options}
    return rule


def _classifiers(rule, path, notes, renames, dest):
    labels = [str(x) for x in rule.get("labels") or []]
    instructions = rule.get("instructions") or rule.get("description") or f"Which label fits this request ({', '.join(labels)})?"
    out = _choice_rule(str(rule.get("name")), rule.get("description"), instructions, {x: "" for x in labels})
    notes.review(path, "the classifier became a systemone choice question over its labels; its model "
                       f"({rule.get('model_path') or rule.get('model') or 'none'}) is not asked any more: "
                       "check the instructions say what the labels mean")
    dest.add("systemone", out)
    renames.set("classifier", str(rule.get("name")), {"type": "systemone", "name": rule.get("name")})


class _Out:
    """The new signals block being written, and the questions several removed rules merge into."""

    def __init__(self, labels: dict[str, tuple[str, ...]]) -> None:
        self.labels = labels                   # preset -> its labels, where this router says
        self.rules: dict[str, list] = {}
        self.merged: dict[str, dict] = {}      # preference, action: the one systemone rule each becomes

    def add(self, kind: str, rule: dict) -> None:
        self.rules.setdefault(kind, []).append(rule)


def _preferences(rule, path, notes, renames, dest):
    # One choice question among all the recipe's preferences: the first rule creates it, later ones add options.
    name = str(rule.get("name"))
    description = rule.get("description") or ", ".join(rule.get("examples") or []) or name
    existing = dest.merged.get("preference")
    if existing is None:
        existing = _choice_rule("preference", None, "Which of these preferences does the user express?", {})
        existing["question"]["criteria"]["none"] = "None of the other preferences."
        dest.merged["preference"] = existing
        dest.add("systemone", existing)
    existing["question"]["criteria"][name] = description
    notes.review(path, f"the preference became option {name!r} of one systemone choice question, preference"
                       + ("; its threshold and examples were dropped" if "threshold" in rule or "examples" in rule
                          else ""))
    renames.set("preference", name, {"type": "systemone", "name": "preference", "label": name})


def _actions(rule, path, notes, renames, dest):
    name = str(rule.get("name"))
    if "action" not in dest.merged:
        dest.merged["action"] = _choice_rule("action", None, "What does the request ask to do?", dict(ACTION_OPTIONS))
        dest.add("systemone", dest.merged["action"])
    labels = [a for a in (rule.get("actions") or rule.get("labels") or [name]) if a in ACTION_OPTIONS] or ["other"]
    notes.review(path, f"the actions rule became the systemone choice question action, label {labels[0]}")
    renames.set("action", name, {"type": "systemone", "name": "action", "label": labels[0]})


def _events(rule, path, notes, renames, dest):
    out = _keep_common(rule)
    words = [str(w) for key in ("event_types", "action_codes", "severities") for w in rule.get(key) or []]
    out["operator"] = "OR"
    out["keywords"] = words or [str(rule.get("name"))]
    notes.review(path, "the events rule became a keywords OR rule over its event types, action codes and "
                       "severities" + ("; temporal dropped" if "temporal" in rule else ""))
    dest.add("keywords", out)
    renames.set("event", str(rule.get("name")), {"type": "keyword", "name": rule.get("name")})


def _structure(rule, path, notes, renames, dest):
    out = _keep_common(rule)
    feature = rule.get("feature") or {}
    source = feature.get("source") or {}
    kind, stype = feature.get("type", "count"), source.get("type")
    predicate = rule.get("predicate")
    if stype == "regex":
        out.update(method="regex", keywords=[str(source.get("pattern", ""))])
    elif stype == "keyword_set":
        out.update(method="exact", keywords=[str(k) for k in source.get("keywords") or []])
    elif stype == "sequence":
        out.update(method="regex", keywords=[
            "(?s:" + ".*?".join(re.escape(str(w)) for w in seq) + ")" for seq in source.get("sequences") or []])
    elif stype == "text_bytes" or kind == "text_bytes":
        out.update(method="regex", keywords=list(UTF8_BYTE_PATTERNS))
        notes.rewrite(path, "the text_bytes structure rule became a byte-counting keywords rule: four regex "
                            "patterns whose match count is the UTF-8 byte length of the current turn")
    else:
        notes.drop(path, f"structure source {stype!r} has no keywords form; dropped (write a keywords or "
                         "conversation rule by hand); its conditions are false")
        renames.set("structure", str(rule.get("name")), False)
        return
    if "case_sensitive" in source:
        out["case_sensitive"] = bool(source["case_sensitive"])
    out["operator"] = "OR"
    if isinstance(predicate, dict) and predicate:
        if kind == "density":
            out["density"] = {k: v * 1000 for k, v in predicate.items()}
            notes.review(f"{path}.predicate", "the density predicate became matches per 1,000 characters (the old "
                                              "unit x 1000); re-fit it on your traffic")
        else:
            out["count"] = dict(predicate)
    elif kind == "density":
        out["density"] = {"gt": 0}
    notes.rewrite(path, "the structure rule became a keywords rule" + (" with a count or density predicate"
                                                                       if isinstance(predicate, dict) else ""))
    dest.add("keywords", out)
    renames.set("structure", str(rule.get("name")), {"type": "keyword", "name": rule.get("name")})


def _kb(rule, path, notes, renames, dest):
    target = rule.get("target") or {}
    value = target.get("value", rule.get("name"))
    domain = value in (dest.labels.get("domain") or ())
    notes.drop(path, f"kb rules never match in v0.5 (no signal reads a knowledge base); its conditions are false. "
                     f"Restore it as a systemone set question over the labels of knowledge base {rule.get('kb')} "
                     f"(this rule read {target.get('kind', 'label')} {value!r})"
                     + (f", or as a domains rule, {{name: {rule.get('name')}, labels: [{value}]}}: {value!r} is a "
                        "label of the domain preset" if domain else ""))
    renames.set("kb", str(rule.get("name")), False)


# v0.4 conversation sources v0.5 has no counterpart for, as the nearest source (a review note says so).
NEAREST_SOURCE = {"active_tool_loop": "tool_result", "assistant_tool_cycle": "tool_result",
                  "assistant_tool_call": "tool_call"}
CONVERSATION_SOURCES = ("message", "turn", "tool_definition", "tool_call", "tool_result", "system_prompt")


def _conversation(rule, path, notes, renames, dest):
    feature = rule.get("feature") or {}
    source = feature.get("source") or {}
    stype = source.get("type")
    if stype in NEAREST_SOURCE:
        rule = {**rule, "feature": {**feature, "source": {**source, "type": NEAREST_SOURCE[stype]}}}
        notes.review(f"{path}.feature.source.type", f"source {stype} has no v0.5 counterpart; it became "
                                                    f"{NEAREST_SOURCE[stype]}, which also counts earlier turns")
    elif stype not in CONVERSATION_SOURCES and stype != "image_content":
        notes.drop(path, f"conversation source {stype!r} has no v0.5 counterpart; the rule was dropped and its "
                         "conditions are false")
        renames.set("conversation", str(rule.get("name")), False)
        return
    if source.get("type") == "image_content":
        out = {**_keep_common(rule), "modality": "image"}
        notes.rewrite(path, "the conversation image_content rule became an input_modality rule, modality image")
        dest.add("input_modality", out)
        renames.set("conversation", str(rule.get("name")), {"type": "input_modality", "name": rule.get("name")})
        return
    dest.add("conversation", rule)


_HANDLERS = {
    "keywords": _keywords,
    "language": _language,
    "domains": _domains,
    "jailbreak": _jailbreak,
    "pii": _pii,
    "safety": _safety,
    "user_feedbacks": _labelled("user_feedbacks", FEEDBACK_LABELS),
    "modality": _labelled("modality", MODALITY_LABELS),
    "complexity": _complexity,
    "reasks": _reasks,
    "topic_continuity": _topic_continuity,
    "decision": _decision,
    "systemone": _systemone,
    "embeddings": _embeddings,
    "classifiers": _classifiers,
    "preferences": _preferences,
    "actions": _actions,
    "events": _events,
    "structure": _structure,
    "kb": _kb,
    "conversation": _conversation,
}
