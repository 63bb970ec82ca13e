"""The Looper (spec 5.6): a decision's algorithm run on the dispatch stage.

Selectors (``random``, ``multi_factor``, ``systemone``) put one candidate first and
keep the others as its fallbacks; ``systemone`` asks the decision model one choice
question over the candidates' descriptions, in a call of its own. The ``escalate`` executor calls the candidates one at a
time, in ``order``, and returns the first answer its ``accept`` check passes,
under a ``budget`` counted from the request's arrival: ``deadline_ms`` and
``max_calls`` (every upstream attempt, transport retries included, and every rating or check call; the
dispatcher asks the budget before each attempt). A streamed
request is held whole while it is judged (a check reads the whole answer), then
relayed. When the budget runs out or no answer passes, ``on_error`` decides:
``last_attempt`` (the default) returns the last answer (an upstream's error answer is a failed call, not an
answer), named in x-vsr-warnings as ``looper_not_accepted;model=...`` and flagged on the exchange, ``fail`` the
Looper's error. With no answer at all, the last call's failure is the error, written in
the router's shape the same whole and streamed; every error names each call's verdict, and each candidate the
budget left uncalled. A model health moved last (every backend ejected) is named, with why, in the trace's
``looper`` member and the preview.

Every call's cost (``selection.cost``) is summed on the exchange's tally; every call's tokens and cost reach
vsr_tokens_total and vsr_cost_total under its model (the answer's tokens through the request's usage meter).
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec
import trio

from ...config.algorithm import Algorithm, AnswerCheck, MultiFactor, SystemOneSelect, Turn, kind_of
from ...config.catalog import PRIMARY
from ...config.schema import ProviderModel
from ...errors import (CallsSpent, LooperBudgetExhausted, LooperCallsExhausted, LooperNoAcceptedAnswer, UpstreamError,
                       UpstreamStatus, UpstreamTooLarge, cause_words)
from ...headers import registry as h
from ...headers import trace
from ...plugins.response_guard import HOLD_LIMIT_BYTES
from ...protocol import systemone as wire
from ...protocol.adapters import Outbound
from ...protocol.translate import sf_string
from ...routing import Route
from ...selection import accept as checks
from ...selection import selectors, synthesis
from ...selection.cost import StreamUsage, Tally, Tokens
from ...selection.static import by_size
from ...systemone.presets import PRESETS
from ...upstream import Attempt, Stream, Whole, failure_cause
from ...upstream import cut as cut_attempts
from ...upstream.dispatch import CallBudget, OutboundFor, _built
from ...upstream.transport import TransportError
from ..recording import session_id
from .exchange import Exchange

log = logging.getLogger("vsr_fast.looper")
Tune = Callable[[bytes, ProviderModel], bytes]   # (provider-bound body, its model) -> the body with an executor's settings
Rewrite = Callable[..., Awaitable[Outbound]]    # (model, client-protocol body, Tune | None = None) -> request
SELECTOR_QUESTION = "selector"     # the systemone selector's question ID (how-the-router-uses-system-one)


def algorithm_of(r: Route) -> Algorithm | None:
    chosen = r.chosen
    return chosen.decision.algorithm if chosen is not None and chosen.decision is not None else None


SELECTORS = ("random", "multi_factor", "systemone")


@dataclasses.dataclass
class Selected:
    """A selector's candidate order, the x-vsr-trace members it writes, and what the routing preview says of it."""

    order: tuple[ProviderModel, ...]
    notes: dict[str, list[str]] = dataclasses.field(default_factory=dict)   # trace member -> its items
    preview: dict = dataclasses.field(default_factory=dict)


async def select(ex: Exchange, r: Route, alg: Algorithm | None) -> Route:
    """The route with its candidates in the order the decision's selector chose (static: as written)."""
    kind = kind_of(alg) if alg is not None else "static"
    if len(r.candidates) >= 2 and kind in ("static", *SELECTORS):
        current = _current(ex, r)
        if current is not None:
            return dataclasses.replace(r, candidates=selectors.first(current, r.candidates))
    if alg is None or kind not in SELECTORS or len(r.candidates) < 2:
        return r
    sel = ex.state.selection
    rng = sel.rng((r.recipe, r.decision), alg.random.seed if alg.random is not None else None) \
        if kind == "random" else None
    text = (lambda: ex.adapter.canonical(ex.req).text) if ex.req is not None else None
    picked = await selection(r, alg, ex.state.table, ex.state.systemone, sel.stats, sel.sessions.get(session_of(ex)),
                             text, rng)
    for member, items in picked.notes.items():
        note(ex, member, items)
    return dataclasses.replace(r, candidates=picked.order)


async def selection(r: Route, alg: Algorithm, table, asker, stats: selectors.ModelStats, affinity: str | None,
                    text: Callable[[], str] | None, rng) -> Selected:
    """The selector's order of ``r``'s candidates: the one code the request path and the routing preview run.
    ``rng`` None (the preview) draws nothing: ``random`` then says what each candidate's chance is."""
    kind = kind_of(alg)
    if kind == "systemone":
        return await _systemone(asker, table, r.candidates, alg.systemone or SystemOneSelect(), text)
    if kind == "random":
        assert r.chosen is not None and r.chosen.decision is not None
        weight: dict[str, float] = {}
        for ref in r.chosen.decision.modelRefs:
            weight.setdefault(ref.model, ref.weight)
        weights = [weight.get(c.name, 0.0) for c in r.candidates]
        if rng is not None:
            return Selected(selectors.pick_random(r.candidates, weights, rng))
        total = sum(weights)
        chances = {c.name: (w / total if total > 0 else 0.0) for c, w in zip(r.candidates, weights)}
        return Selected(tuple(r.candidates), preview={"type": "random", "draw": total > 0, "probabilities": chances})
    cfg = alg.multi_factor or MultiFactor()
    domain = _domain_scores(table, r)
    order, ranked = selectors.ranked_multi_factor(r.candidates, cfg, stats, affinity, domain)
    return Selected(order, {"ranking": [f"{name}={score:.3f}" for name, score in ranked]},
                    {"type": "multi_factor", "ranking": [{"model": n, "score": s} for n, s in ranked]})


def _current(ex: Exchange, r: Route) -> ProviderModel | None:
    """The model that served the session's last turn, when it is a candidate and the route keeps it: a route an
    earlier turn holds, or a decision with ``retention.keep_current_model`` (spec 5.7)."""
    name = ex.kept
    d = r.chosen.decision if r.chosen is not None else None
    if name is None and d is not None and d.retention is not None and d.retention.keep_current_model:
        name = ex.state.selection.sessions.get(session_of(ex))
    found = next((c for c in r.candidates if c.name == name), None) if name is not None else None
    if found is not None:
        note(ex, "selector", [f"kept: {found.name} served the session's last turn"])
    return found


def _domain_scores(table, r: Route) -> dict[str, float] | None:
    """The model_scores of the domain rules this request matched (read when the decision's rules name them)."""
    compiled = table.recipes.get(r.recipe) if r.recipe is not None else None
    if compiled is None or r.readings is None:
        return None
    matched = []
    for rule in compiled.recipe.signals.domains:
        outcome = r.readings.get("domain", rule.name)
        if rule.model_scores and outcome is not None and outcome.matched:
            matched.append(rule.model_scores)
    return selectors.domain_scores(matched) or None


async def _systemone(asker, table, candidates: tuple[ProviderModel, ...], cfg: SystemOneSelect,
                     text: Callable[[], str] | None) -> Selected:
    """One choice question whose options are the candidates; the decision model's most probable one first.
    When it is not ready, late or answers invalidly, the first modelRef answers (spec 5.6)."""
    answers = None
    deployment = cfg.deployment or table.catalog.system.decision_model.deployment or PRIMARY
    if not running(asker, deployment):
        return _unanswered(candidates, f"systemone: deployment {deployment} is not running (a restart starts it), "
                                       "the first candidate goes first")
    if text is not None:
        question = wire.ChoiceQuestion(criteria=selectors.descriptions(candidates, cfg), instructions=cfg.instructions)
        answers = await asker.ask_standard(deployment, wire.State(request=text()), {SELECTOR_QUESTION: question},
                                           cfg.timeout_ms)
    answer = answers.get(SELECTOR_QUESTION) if answers else None
    if not isinstance(answer, wire.ChoiceAnswer):
        return _unanswered(candidates, "systemone: no answer, the first candidate goes first")
    order = selectors.pick_answered(candidates, answer.probabilities)
    return Selected(order, {"selector": [f"systemone: {c.name}={answer.probabilities.get(c.name, 0.0):.3f}"
                                         for c in order]},
                    {"type": "systemone", "asked": deployment,
                     "probabilities": {c.name: answer.probabilities.get(c.name, 0.0) for c in order}})


def _unanswered(candidates: tuple[ProviderModel, ...], why: str) -> Selected:
    return Selected(candidates, {"selector": [why]}, {"type": "systemone", "asked": None, "why": why})


async def previewed(r: Route, table, asker, state: selectors.SelectionState, text: Callable[[], str] | None,
                    affinity: str | None = None, live: Callable[[str], bool] | None = None) -> tuple[Route, Selected]:
    """The routing preview's candidates in the order the request path would try them: the same selector (the
    systemone one asks its question; random draws nothing and says each candidate's chance) and escalate's
    order. Nothing it does moves what the request path remembers (random's generators, sessions)."""
    alg = algorithm_of(r)
    kind = kind_of(alg) if alg is not None else "static"
    if alg is not None and kind in SELECTORS and len(r.candidates) >= 2:
        picked = await selection(r, alg, table, asker, state.stats, affinity, text, None)
    elif alg is not None and kind == "escalate":
        order, moves = ordered_why(alg, r.candidates, live)
        picked = Selected(order, {"looper": moves} if moves else {},
                          preview={"type": "escalate", "calls": [m.name for m in order],
                                   "order": alg.escalate.order if alg.escalate is not None else "modelRefs",
                                   **({"moved": moves} if moves else {})})
    else:
        picked = Selected(r.candidates)
    return dataclasses.replace(r, candidates=picked.order), picked


def ordered(alg: Algorithm | None, candidates: tuple[ProviderModel, ...],
            live: Callable[[str], bool] | None = None) -> tuple[ProviderModel, ...]:
    """The order escalate calls ``candidates`` in: by cost when ``order: cost``, models with every backend ejected
    (``live`` false) last. The request path and the routing preview both use it."""
    return ordered_why(alg, candidates, live)[0]


def ordered_why(alg: Algorithm | None, candidates: tuple[ProviderModel, ...],
                live: Callable[[str], bool] | None = None) -> tuple[tuple[ProviderModel, ...], list[str]]:
    """``ordered``, and why a model is not where ``order`` put it: each model health moved last, named with the
    reason, for the trace's ``looper`` member and the preview (a reorder the caller can see, never a silent one)."""
    order = _ordered(alg, candidates) if alg is not None else candidates
    if live is None:
        return order, []
    moved = _live_first(live, order)
    if moved is order:
        return order, []
    name = alg.escalate.order if alg is not None and alg.escalate is not None else "modelRefs"
    return moved, [f"{m.name}: moved last (was {order.index(m) + 1} of {len(order)} by {name}), every backend "
                   "ejected by health checks" for m in order if not live(m.name)]


def running(asker, deployment: str) -> bool:
    """Whether the process's System One client runs ``deployment``: it starts them at start only, so one that
    a reload began to ask waits for a restart (the reload names it)."""
    return asker is not None and deployment in asker.client.runners


def note(ex: Exchange, member: str, items: list[str]) -> None:
    if ex.trace is not None:
        ex.trace = trace.with_member(ex.trace, trace.list_member(member, items))


def served(ex: Exchange, model: str) -> None:
    """Remember the model that answered the session's turn: multi_factor's affinity, retention's current model."""
    ex.state.selection.sessions.served(session_of(ex), model)


def session_of(ex: Exchange) -> bytes | None:
    """The request's session as affinity and retention know it (``session_key``)."""
    return session_key(ex.state, ex.scope)


def session_key(state, scope) -> bytes | None:
    """The session as affinity knows it: the caller's owner (``Identity.owner``) and the session's name, so a
    caller naming another tenant's session id moves a session of its own, never theirs."""
    name = session_id(scope, state.session_headers)
    if not name:
        return None
    owner = state.identity(scope).owner
    return name if owner is None else owner.encode() + b"\n" + name


# --- cost ------------------------------------------------------------------------------------------


def count_cost(ex: Exchange, answer: Stream | Whole, tally: Tally) -> Stream | Whole:
    """Add the final answer's cost: a whole body now, a stream once its last chunk passed (usage comes last)."""
    if isinstance(answer, Whole):
        if answer.status < 400:
            tally.add_whole(answer.model, answer.body, ex.meter.estimate if ex.meter is not None else None)
        metric(ex, tally)
        return answer
    if answer.model.pricing is None:
        return answer
    reader = StreamUsage()
    reader.feed(answer.first)
    answer.rest = _tapped(ex, answer.rest, reader, answer.model, tally)
    return answer


async def _tapped(ex: Exchange, rest: AsyncIterator[bytes], reader: StreamUsage, model: ProviderModel,
                  tally: Tally) -> AsyncIterator[bytes]:
    async for chunk in rest:
        reader.feed(chunk)
        yield chunk
    reader.feed(b"\n")
    tokens, meter = reader.tokens, ex.meter
    if not tokens.seen and meter is not None and meter.answered:
        # No usage came: the estimate of the text the meter read (every chunk passed it before this line runs).
        tokens = Tokens.estimated(*meter.estimate())
    tally.add(model, tokens)
    metric(ex, tally)


def metric(ex: Exchange, tally: Tally) -> None:
    if tally.total is None:
        return
    for model, cost in tally.calls:
        ex.state.metrics.cost.inc(ex.decision or "", model, tally.currency or "", by=cost)
    tally.calls.clear()


# --- escalate ----------------------------------------------------------------------------------------


class Spent:
    """A held stream's response, already closed: the relay's aclose has nothing left to do. It carries the
    backend's x-ratelimit-* read before it closed, or none (a Looper's answer is its own)."""

    def __init__(self, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        self.headers = headers or []

    def rate_headers(self) -> list[tuple[bytes, bytes]]:
        return self.headers

    async def aclose(self) -> None:
        return None


async def nothing() -> AsyncIterator[bytes]:
    return
    yield b""


def _ordered(alg: Algorithm, candidates: tuple[ProviderModel, ...]) -> tuple[ProviderModel, ...]:
    esc = alg.escalate
    if esc is not None and esc.order == "size":
        return by_size(candidates)
    if esc is not None and esc.order == "cost":
        return tuple(sorted(candidates, key=lambda m: (m.pricing.input + m.pricing.output) if m.pricing else 0.0))
    return candidates


def _live_first(live: Callable[[str], bool], order: tuple[ProviderModel, ...]) -> tuple[ProviderModel, ...]:
    """``order`` with the models whose every backend is ejected moved last: the cheap model first, but not a
    read timeout first on every request while its only backend is out (the dispatcher's rule, per model)."""
    up = [m for m in order if live(m.name)]
    return order if not up or len(up) == len(order) else (*up, *(m for m in order if m not in up))


_MAX_TOKENS = {"openai": "max_tokens", "anthropic": "max_tokens", "responses": "max_output_tokens"}


def _asking(outbound_for: OutboundFor, alg: Algorithm, token_cap: list[int | None],
            asked: dict[str, tuple[bool, int]]) -> OutboundFor:
    """Each call's request as the executor needs it: Chat candidates asked for logprobs when a confidence
    check reads them (top 2 for ``margin`` and ``hybrid``), and max_tokens capped by the turn's remaining time.
    ``asked``: per model whose logprobs the router asked for beyond the client's request, what the client
    asked (logprobs, top_logprobs), for ``_as_asked``."""
    esc = alg.escalate
    conf = esc.accept.confidence if esc is not None and esc.accept is not None else None
    if conf is not None and conf.method == "self_verify":
        conf = None                      # the model rates its answer in a call of its own: no logprobs read
    if conf is None and (alg.budget is None or alg.budget.turn is None):
        return outbound_for

    async def built(model: ProviderModel) -> Outbound:
        out = await _built(outbound_for, model)
        cap, key = token_cap[0], _MAX_TOKENS.get(model.api_format)
        if (conf is None or model.api_format != "openai") and (cap is None or key is None):
            return out
        body = msgspec.json.decode(out.body)
        if conf is not None and model.api_format == "openai":
            want, top = body.get("logprobs") is True, body.get("top_logprobs") or 0
            body["logprobs"] = True
            if conf.method in ("margin", "hybrid"):
                body["top_logprobs"] = max(2, top)
            if not want or body.get("top_logprobs", 0) > top:
                asked[model.name] = (want, top)
        if cap is not None and key is not None:
            if model.api_format == "openai" and "max_completion_tokens" in body:
                key = "max_completion_tokens"
            body[key] = max(1, min(cap, body.get(key) or cap))
        return dataclasses.replace(out, body=msgspec.json.encode(body))

    return built


def _turn_slice(turn: Turn, first: bool, remaining: float) -> tuple[float | None, str | None]:
    """The attempt's time (s), or why it may not start: the tier report's wall-clock rules."""
    if remaining < turn.min_start_ms / 1000:
        return None, f"under {turn.min_start_ms} ms left in the turn"
    if first:
        return min(max(remaining - turn.reserve_ms / 1000, remaining / 2), turn.thinking_cap_ms / 1000), None
    if remaining < turn.rescue_floor_ms / 1000:
        return None, f"under the rescue floor ({turn.rescue_floor_ms} ms) left in the turn"
    return min(turn.rescue_cap_ms / 1000, remaining), None


async def _call(ex: Exchange, model: ProviderModel, outbound_for: OutboundFor, streamed: bool, take
                ) -> tuple[Stream | Whole, bytes]:
    """One candidate's whole answer; a stream is held (bounded) and handed back as one chunk."""
    dispatcher = ex.state.dispatcher
    if not streamed:
        whole = await dispatcher.whole((model,), outbound_for, [], take)
        return whole, whole.body
    answer = await dispatcher.stream((model,), outbound_for, [], take)
    if isinstance(answer, Whole):
        return answer, answer.body
    return await held(answer)


async def held(answer: Stream, *, keep_headers: bool = False) -> tuple[Stream, bytes]:
    """``answer`` read to its end (at most HOLD_LIMIT_BYTES) before any of it is sent, its backend's stream closed,
    and handed back as one chunk (with the backend's x-ratelimit-* when ``keep_headers``). One that breaks on the
    way is its model's failure, raised with the stream's attempts: nothing of it was sent, the next may answer."""
    name = answer.model.name
    body = bytearray(answer.first)
    deadline = trio.current_effective_deadline()        # before any cancellation (inside one it reads -inf)
    try:
        async for chunk in answer.rest:
            body += chunk
            if len(body) > HOLD_LIMIT_BYTES:
                raise UpstreamTooLarge(f"the answer of {name} grew past the {HOLD_LIMIT_BYTES >> 20} MiB a held "
                                       "answer may keep")
        erred = getattr(answer.rest, "ended_in_error", None)    # a checked backend stream's
        said = erred() if erred is not None else None
        if said is not None:        # the model ended its answer with its own error event: a failure, not an answer
            raise said
    except trio.Cancelled:      # cut while held: the stream's attempt ends as what cut it, and is recorded
        why = cut_attempts.cause(deadline)
        answer.cut_short(why)
        if answer.attempts:     # the word its metric counts (``cut_short``): a cut is no midstream_ failure
            answer.attempts[-1].cause = why
        cut_attempts.left(answer.attempts)
        raise
    except (*TransportError, UpstreamError) as exc:     # broke mid-stream (or a broken event, or past a bound)
        cause = failure_cause(exc)
        answer.broke(cause)
        failure = exc if isinstance(exc, UpstreamError) else UpstreamError(
            f"the stream of {name} broke: {cause_words(cause)}", cause=f"midstream_{cause}",
            detail=f"the stream of {name} broke: {exc!r}")
        if answer.attempts:     # the attempt that answered its first event failed after all
            last = answer.attempts[-1]
            last.error, last.cause, last.failed = failure.code, f"midstream_{cause}", True
        failure.attempts = list(answer.attempts)
        if failure is exc:
            raise
        raise failure from exc
    finally:
        headers = answer.rate_headers if keep_headers else []
        with trio.CancelScope(shield=True):
            await answer.aclose()
    whole = bytes(body)
    return dataclasses.replace(answer, first=whole, rest=nothing(), response=Spent(headers)), whole


def _error_answer(answer: Stream | Whole) -> UpstreamStatus:
    """A backend's error answer as the failure it is: an upstream error is not an answer ``last_attempt`` returns."""
    body = answer.body if isinstance(answer, Whole) else answer.first
    return UpstreamStatus.at(answer.backend.label, f"answered HTTP {answer.status}", status=answer.status, body=body,
                             content_type=answer.content_type or "application/json",
                             api_format=answer.model.api_format,
                             retry_after_s=answer.retry_after_s if isinstance(answer, Whole) else None)


def _reported(failure: UpstreamError, verdicts: list[str]) -> UpstreamError:
    """The last call's failure as the escalation's error: a backend's error answer is read and written in the
    router's shape (``tried`` names every call's verdict), the same whole and streamed."""
    said = f"escalate: {'; '.join(verdicts)}"
    if isinstance(failure, UpstreamStatus):
        failure.tried = said
    else:       # a transport failure's message names its own attempts only: every call's verdict joins it
        failure.noting(said)
    return failure


async def escalate(ex: Exchange, candidates: tuple[ProviderModel, ...], outbound_for: OutboundFor,
                   alg: Algorithm, streamed: bool, tally: Tally, rewritten: Rewrite | None = None) -> Stream | Whole:
    """The first accepted answer of the candidates in order, within the budget; else ``on_error``: the last
    answer (an upstream's error answer is none), or the error."""
    esc = alg.escalate
    assert esc is not None and esc.accept is not None    # a Chat recipe's escalate has its check (load checks)
    budget = alg.budget
    at = ex.arrived + budget.deadline_ms / 1000 if budget is not None and budget.deadline_ms else float("inf")
    max_calls = budget.max_calls if budget is not None and budget.max_calls else None
    turn = budget.turn if budget is not None else None
    token_cap: list[int | None] = [None]
    asked: dict[str, tuple[bool, int]] = {}
    ask = _asking(outbound_for, alg, token_cap, asked)
    attempts: list[Attempt] = []
    last: Stream | Whole | None = None      # the last real answer
    failure: UpstreamError | None = None    # the last call's failure
    verdicts: list[str] = []
    exhausted, timed = None, True           # why the budget stopped it; by time (else max_calls)
    calls = CallBudget(max_calls)
    spent: list[tuple[Stream | Whole, Tokens]] = []     # each answered call's usage, for vsr_tokens_total
    ex.path = h.ResponsePath.LOOPER
    order, moves = ordered_why(alg, candidates, ex.state.upstreams.live)
    verdicts += moves
    called: set[str] = set()
    try:
        for i, model in enumerate(order):
            if calls.spent():
                exhausted, timed = f"max_calls ({max_calls}) spent", False
                break
            now = trio.current_time()
            if now >= at:
                exhausted = f"deadline ({budget.deadline_ms} ms from arrival) passed"  # type: ignore[union-attr]
                break
            stop = at
            if turn is not None:
                remaining = min(at, ex.deadline) - now
                share, refused = _turn_slice(turn, i == 0, remaining)
                if share is None:
                    exhausted = refused
                    break
                stop = min(at, now + share)
                token_cap[0] = int(remaining * turn.tokens_per_s)
            ex.model = model.name       # the last model called: what an error names, as the record does
            called.add(model.name)
            answer = None
            with trio.move_on_at(stop) as cut:
                try:
                    answer, body = await _call(ex, model, ask, streamed, calls.take)
                except UpstreamError as exc:
                    attempts += exc.attempts
                    failure = exc
                    verdicts.append(f"{model.name}: {exc.code}")
            attempts += cut_attempts.taken()     # the call the budget cut: its attempt was started, and is recorded
            if cut.cancelled_caught and stop < at:
                verdicts.append(f"{model.name}: cut at its share of the turn")   # a rescue may follow
                continue
            if cut.cancelled_caught:
                exhausted = f"deadline ({budget.deadline_ms} ms from arrival) passed"  # type: ignore[union-attr]
                verdicts.append(f"{model.name}: cut by the budget")
                break
            if answer is None:
                continue
            attempts += answer.attempts
            if answer.status >= 400:
                failure = _error_answer(answer)
                verdicts.append(f"{model.name}: HTTP {answer.status}")
                await _close(answer)
                continue
            tokens = _tokens(body, isinstance(answer, Stream))
            spent_on(answer.attempts, tokens)
            tally.add(answer.model, tokens)
            spent.append((answer, tokens))
            if last is not None:
                await _close(last)
            last = answer
            as_stream = streamed and isinstance(answer, Stream)
            ok, why = checks.accepted(esc.accept, body, as_stream, answer.model.api_format)
            conf = esc.accept.confidence
            if ok and conf is not None and conf.method == "self_verify" and rewritten is not None:
                # The model's rating of its own answer: one more call, when the budget has one.
                ok, why = False, "self_verify: cut by the budget"
                with trio.move_on_at(at):
                    ok, why, rated = await _self_verify(ex, answer.model, body, as_stream, conf.gte, rewritten, tally,
                                                        calls.take)
                    attempts += rated
            if ok and esc.accept.systemone is not None:
                ok, why = False, "answer_check: max_calls spent"
                if calls.take():                            # the judge's call counts against the budget
                    why = "answer_check: cut by the budget"
                    with trio.move_on_at(at):
                        ok, why = await _answer_check(ex, esc.accept.systemone, answer.model, body, as_stream)
            verdicts.append(f"{model.name}: {why}, {'accepted' if ok else 'rejected'}")
            if ok:
                _done(ex, attempts, verdicts, tally, spent, answer)
                return _as_asked(answer, asked)
    except trio.Cancelled:      # the request's deadline or the client's leaving: every hop started is kept
        verdicts.append(f"{ex.model}: cut ({cut_attempts.cause(ex.deadline)})")
        _done(ex, attempts, verdicts, tally, spent, None)
        raise
    if exhausted is not None:       # the candidates the budget left uncalled, named with the calls made
        verdicts += [f"{m.name}: not called, {exhausted}" for m in order if m.name not in called]
    fail = alg.on_error == "fail"
    _done(ex, attempts, verdicts, tally, spent, None if fail else last)    # last: returned unless it fails
    if last is not None and not fail:
        _not_accepted(ex, last)
        return _as_asked(last, asked)
    prepaid(ex)
    if last is not None:
        await _close(last)
    why = "; ".join(verdicts)
    if exhausted is not None and (timed or last is not None or failure is None):
        raise (LooperBudgetExhausted if timed else LooperCallsExhausted)(
            f"the escalation's budget ran out: {exhausted} ({why})")
    if last is None:
        # max_calls spent after a failure, or every candidate failed: the real cause, the last failure.
        raise _reported(failure, verdicts) if failure is not None else UpstreamError("no candidate answered")
    raise LooperNoAcceptedAnswer(f"no candidate's answer passed the accept check ({why})")


def _not_accepted(ex: Exchange, answer: Stream | Whole) -> None:
    """An answer returned though no check accepted it (``on_error: last_attempt``): the client is told in
    x-vsr-warnings (the answer is held while judged, so its headers are still to leave), and the exchange is
    flagged (``Exchange.not_accepted``: such an answer is never stored as the question's answer)."""
    ex.not_accepted = True
    ex.codes.append(f"looper_not_accepted;model={sf_string(answer.model.name)}")


async def _self_verify(ex: Exchange, model: ProviderModel, body: bytes, streamed: bool, gte: float,
                       rewritten: Rewrite, tally: Tally, take) -> tuple[bool, str, list[Attempt]]:
    """confidence.self_verify: the model that answered rates its own answer (0..1) when asked, in a whole call
    whose cost counts and that ``take`` (max_calls) allows; an answer it could not rate is not accepted."""
    text = checks.answer_text(body, model.api_format, streamed)
    if not text or ex.req is None:
        return False, "self_verify: nothing to rate", []
    prompt = checks.SELF_VERIFY.format(question=ex.adapter.canonical(ex.req).text, answer=text)
    out = await rewritten(model, synthesis.with_prompt(synthesis.plain_body(ex.req.raw), ex.api, prompt))
    try:
        whole = await ex.state.dispatcher.whole((model,), fixed(out), [], take)
    except CallsSpent:
        return False, "self_verify: max_calls spent", []
    except UpstreamError as exc:
        return False, f"self_verify: {exc.code}", exc.attempts
    if whole.status >= 400:
        return False, f"self_verify: HTTP {whole.status}", whole.attempts
    tokens = _tokens(whole.body, False)
    spent_on(whole.attempts, tokens)
    tally.add(model, tokens)
    count_tokens(ex, model.name, tokens)
    rating = checks.self_rating(checks.answer_text(whole.body, model.api_format, False) or "")
    if rating is None:
        return False, "self_verify: no rating", whole.attempts
    return rating >= gte, f"self_verify={rating:.3f}", whole.attempts


def fixed(out: Outbound) -> OutboundFor:
    async def built(model: ProviderModel) -> Outbound:
        return out
    return built


async def _answer_check(ex: Exchange, check: AnswerCheck, model: ProviderModel, body: bytes,
                        streamed: bool) -> tuple[bool, str]:
    """accept.systemone: the decision model's answer_check of the request and this answer, P(yes) >= gte; an
    answer it could not judge (no text, no answer in time) is not accepted."""
    text = checks.answer_text(body, model.api_format, streamed)
    asker = ex.state.systemone
    deployment = check.deployment or ex.state.table.catalog.system.decision_model.deployment or PRIMARY
    if not text or not running(asker, deployment) or ex.req is None:
        return False, ("answer_check: nothing to judge" if not text else
                       f"answer_check: deployment {deployment} is not running (a restart starts it)")
    preset = PRESETS["answer_check"]
    state = wire.State(request=ex.adapter.canonical(ex.req).text, answer=text)
    answers = await asker.ask_standard(deployment, state, {preset.wire_id: preset.question()}, check.timeout_ms)
    verdict = answers.get(preset.wire_id) if answers else None
    if not isinstance(verdict, wire.NoulAnswer):
        return False, "answer_check: no answer"
    return verdict.noul >= check.gte, f"answer_check={verdict.noul:.3f}"


def _as_asked(answer: Stream | Whole, asked: dict[str, tuple[bool, int]]) -> Stream | Whole:
    """The answer with the logprobs its client asked for, as OpenAI would answer it: none (``logprobs: null``)
    unless it asked, and as many top_logprobs as it asked, not the router's own count."""
    wanted = asked.get(answer.model.name)
    if wanted is None or answer.status >= 400:
        return answer
    if isinstance(answer, Whole):
        return dataclasses.replace(answer, body=_logprobs_as_asked(answer.body, *wanted))
    lines = [b"data: " + _logprobs_as_asked(line[5:], *wanted) if line.startswith(b"data:") and b'"logprobs"' in line
             else line for line in answer.first.split(b"\n")]
    return dataclasses.replace(answer, first=b"\n".join(lines))


def _logprobs_as_asked(doc: bytes, want: bool, top: int) -> bytes:
    try:
        d = msgspec.json.decode(doc)
    except msgspec.DecodeError:
        return doc
    if not isinstance(d, dict):
        return doc
    for choice in d.get("choices") or ():
        if not isinstance(choice, dict) or not isinstance(choice.get("logprobs"), dict):
            continue
        if not want:
            choice["logprobs"] = None
            continue
        for key in ("content", "refusal"):
            for token in choice["logprobs"].get(key) or ():
                if isinstance(token, dict) and isinstance(token.get("top_logprobs"), list):
                    token["top_logprobs"] = token["top_logprobs"][:top]
    return msgspec.json.encode(d)


def _tokens(body: bytes, streamed: bool) -> Tokens:
    """One call's usage, from its whole body or its held stream."""
    if not streamed:
        tokens = Tokens()
        tokens.read(body)
        return tokens
    reader = StreamUsage()
    reader.feed(body + b"\n")
    return reader.tokens


def spent_on(attempts: list[Attempt], tokens: Tokens) -> None:
    """A call's usage on the attempt that answered it (the last): the replay record says what each call spent."""
    if tokens.seen and attempts:
        attempts[-1].usage = (tokens.input, tokens.output)


def count_tokens(ex: Exchange, model: str, tokens: Tokens) -> None:
    """vsr_tokens_total and the caller's token limits for a call whose answer the client does not get (the
    request's usage meter never reads it): a rejected escalation step or a self-verify rating is paid for."""
    if tokens.seen:
        ex.state.metrics.tokens.inc(model, "input", by=tokens.input)
        ex.state.metrics.tokens.inc(model, "output", by=tokens.output)
        if ex.meter is not None:
            ex.meter.unsent += tokens.input + tokens.output


def prepaid(ex: Exchange) -> None:
    """A Looper run that failed: every call it made was charged as it ended (``count_tokens``), and that is what
    the request is charged, not an estimate of its prompt besides."""
    if ex.meter is not None:
        ex.meter.prepaid = True


async def _close(answer: Stream | Whole) -> None:
    if isinstance(answer, Stream):
        with trio.CancelScope(shield=True):
            await answer.aclose()


def _done(ex: Exchange, attempts: list[Attempt], verdicts: list[str], tally: Tally,
          spent: list[tuple[Stream | Whole, Tokens]], kept: Stream | Whole | None) -> None:
    """The record, the trace and the metrics of every call; ``kept``, the answer returned, has its tokens
    counted by the request's usage meter as it is sent."""
    ex.tried([*attempts, *cut_attempts.taken()], hops=True)     # with any call a budget or deadline cut
    note(ex, "looper", verdicts)
    metric(ex, tally)
    for answer, tokens in spent:
        if answer is not kept:
            count_tokens(ex, answer.model.name, tokens)
