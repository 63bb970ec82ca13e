"""The tools plugin on the request as the client wrote it: ``policy`` first, then ``select`` (spec 5.7).

Runs once per request, before any candidate's body is written, so every
api_format receives the same tools. ``select`` asks ``tool_need`` (a yes/no
gate) and ``tool_rank`` (a choice whose options are the candidate tools) in
one standard request to the decision model (or the judge's own deployment),
about the current user turn. A large set is narrowed first by BM25 recall
when the match block asks for it; the judge reads at most ``max_candidates``
(255 at most, a choice question's limit), the rest truncated in order, each
truncation counted and put in the trace. What the plugin did goes in the
replay record (``PluginsApplied``, model None: it applies to every candidate).
"""
from __future__ import annotations

import msgspec

from ..._ext.bm25 import BM25Index, tokenize
from ...config.catalog import PRIMARY
from ...errors import ToolSelectionFailed
from ...headers import trace
from ...plugins import tools as tp
from ...protocol import systemone as wire
from ...systemone.presets import PRESETS
from ...plugins.match import keep
from .exchange import Exchange
from .match import truncated

_DECODE = msgspec.json.Decoder()
_NATIVE = {"chat": "openai", "messages": "anthropic", "responses": "responses"}


async def govern(ex: Exchange) -> None:
    """Apply the route's tools policy and selection to ``ex.req``: a decision's, the recipe fallback's, a direct
    model's."""
    r, req = ex.route, ex.req
    assert r is not None and req is not None
    policy = ex.state.policies.tools(r.recipe, r.decision)
    fmt = _NATIVE.get(ex.api)
    if policy is None or fmt is None:
        return
    body = _DECODE.decode(req.raw)
    if not isinstance(body, dict):
        return
    changes: list[str] = []
    offered = tp.listed(body, fmt)
    removed = tp.keep_tools(body, fmt, policy.allows) if offered else []
    if removed:
        changes.append(f"policy {policy.mode}: removed {', '.join(removed)}")
    # The trace's: what the policy kept as well, its names cut short (the record has them all).
    traced = [f"policy {policy.mode}: kept {len(offered) - len(removed)} of {len(offered)}"
              + (f", removed {_few(removed)}" if removed else "")] if offered else []
    if policy.strip_history:
        stripped = tp.strip_history(body, fmt)
        if stripped:
            changes.append(f"stripped {stripped} tool calls and results")
            traced.append(changes[-1])
    if policy.select is not None and policy.mode != "none":
        change = await _select(ex, body, fmt, policy)
        if change:
            changes.append(change)
            traced.append(change)
    if ex.trace is not None and traced:
        ex.trace = trace.with_member(ex.trace, trace.list_member("tools", traced))
    if changes:
        ex.req = ex.adapter.with_raw(req, tp.encode(body))
        ex.rec.plugins_applied(None, [f"tools: {c}" for c in changes])


TRACE_NAMES = 8     # tool names a trace item names before "and N more"


def _few(names: list[str]) -> str:
    more = len(names) - TRACE_NAMES
    return ", ".join(names[:TRACE_NAMES]) + (f" and {more} more" if more > 0 else "")


async def _select(ex: Exchange, body: dict, fmt: str, policy: tp.Tools) -> str | None:
    select = policy.select
    assert select is not None
    present = tp.listed(body, fmt)
    if select.mode == "add":
        have = {ref.key for ref in present}
        pool = [tp.ToolRef(t.name, None, t.description) for t in select.catalog
                if t.name not in have and policy.allows(tp.ToolRef(t.name))]
    else:
        pool = present[select.preserve_count:]
    if not pool:
        return None
    text = ex.adapter.canonical(ex.req).text
    ranked = _recall(select, pool, text) if select.recall_top_k is not None else pool
    judged = ranked[:select.judge.cap]
    if len(ranked) > len(judged):
        truncated(ex, "tools.select", len(ranked), len(judged))
    chosen, need = await _judge(ex, select, judged, text)
    if chosen is None:
        return _failed(body, fmt, select, present)
    if select.mode == "add":
        by_name = {t.name: t for t in select.catalog}
        tp.add_tools(body, fmt, [by_name[k] for k in chosen])
        return f"select add (P(need)={need:.2f}): {', '.join(chosen) or 'none'}"
    keep = {ref.key for ref in present[:select.preserve_count]} | set(chosen)
    dropped = tp.keep_tools(body, fmt, lambda ref: ref.key in keep)
    return (f"select filter (P(need)={need:.2f}): kept {', '.join(k for k in (r.key for r in present) if k in keep)}"
            f"{'; removed ' + str(len(dropped)) if dropped else ''}")


def _recall(select: tp.Select, pool: list[tp.ToolRef], text: str) -> list[tp.ToolRef]:
    """BM25 over each tool's name and description: the best ``top_k`` at or above ``min_similarity``."""
    index = BM25Index([tokenize(f"{ref.key.replace('_', ' ').replace('.', ' ')} {ref.description}") for ref in pool])
    best = index.top_k(tokenize(text), select.recall_top_k or len(pool))
    floor = select.recall_min
    return [pool[i] for i, score in best if floor is None or score >= floor]


async def _judge(ex: Exchange, select: tp.Select, candidates: list[tp.ToolRef],
                 text: str) -> tuple[list[str] | None, float]:
    """The chosen tools' keys, best first, and P(need); (None, 0) when the decision model failed."""
    asker = ex.state.systemone
    if asker is None or not candidates:
        return (None, 0.0) if asker is None else ([], 0.0)
    need_q, rank_q = PRESETS["tool_need"], PRESETS["tool_rank"]
    questions: dict[str, wire.Question] = {need_q.wire_id: need_q.question()}
    if len(candidates) >= 2:
        criteria = {ref.key: ref.description or ref.key for ref in candidates}
        questions[rank_q.wire_id] = wire.ChoiceQuestion(criteria=criteria, instructions=rank_q.instructions)
    deployment = select.judge.deployment or ex.state.table.catalog.system.decision_model.deployment or PRIMARY
    answers = await asker.ask_standard(deployment, wire.State(request=text), questions, select.timeout_ms)
    need = answers.get(need_q.wire_id) if answers else None
    rank = answers.get(rank_q.wire_id) if answers else None
    if not isinstance(need, wire.NoulAnswer) or (len(candidates) >= 2 and not isinstance(rank, wire.ChoiceAnswer)):
        return None, 0.0
    if need.noul < select.need_threshold:
        return [], need.noul
    if not isinstance(rank, wire.ChoiceAnswer):
        return [candidates[0].key], need.noul
    order = {ref.key: i for i, ref in enumerate(candidates)}
    scored = [(p, order[k]) for k, p in rank.probabilities.items() if k in order]
    return [candidates[i].key for _, i in keep(scored, select.judge)], need.noul


def _failed(body: dict, fmt: str, select: tp.Select, present: list[tp.ToolRef]) -> str:
    """``on_error``: add mode skips or fails; filter mode keeps, strips or fails."""
    if select.on_error == "fail":
        raise ToolSelectionFailed("tools.select could not choose: the decision model did not answer in time")
    if select.on_error == "strip" and present:
        tp.keep_tools(body, fmt, lambda ref: False)
        return "select failed: stripped every tool (on_error: strip)"
    return f"select failed: tools left as they were (on_error: {select.on_error})"


