"""The executors that write an answer of their own (spec 5.6), as the public vLLM Semantic Router defines them:

- ``ratings``: every candidate answers, concurrently; one choice per model.
- ``remom``: rounds of parallel answers (``breadth_schedule``, then one final call),
  each round's user turn the problem and the previous round's answers.
- ``fusion``: a panel answers in parallel, the judge model writes a JSON analysis
  of the answers, then the final answer from both.
- ``workflows``: roles in order, each role's models in parallel, each reading the
  earlier outputs its ``access_list`` allows; a final model merges. ``static``: the
  roles as configured; ``dynamic``: as the planner model wrote them (JSON).

Every call is a whole (non-streamed) request to one candidate, written from the
client's request with the executor's question as its last turn when it asks
something else (``synthesis.with_prompt``), for one choice (Chat's ``n`` is dropped, and
said so), tools left out (an executor answers in text; the tool calls and
results in the history become text, which a provider takes without tools, and
``x-vsr-warnings`` lists what was dropped and converted), through the
shaping plugins and masking like any candidate's.

A key with ``models`` reaches only those of the decision's models (``Identity.reaches``, the rule that trimmed
the candidates): before any call, a model the executor cannot do without (the remom synthesis, the fusion
judge, the workflow's planner and final model) that the key cannot reach is a 403 ``model_not_allowed``; a panel
or role member it cannot reach is left out, each named in ``x-vsr-warnings`` as ``model_not_allowed;model=...``,
and a panel or role left with none is the 403. The calls share the
executor's ``budget`` (deadline and max_calls from the request's arrival, every attempt counted) and
their cost and usage are summed; each call is charged to the caller and counted under its own model as it
ends, so a run that fails has paid for what it spent. ``on_error: skip`` (the default) drops a failed call
(fusion: a judge's analysis that is not JSON is used as text, and a failed final answer leaves the panel's first
answer, each said in the trace and x-vsr-warnings); ``fail`` fails the request, its error naming every call
made and what became of it; a call skipped names its model in x-vsr-warnings (``looper_call_failed;model=...``),
and a model whose connection failed is not asked again in the request. A failed run names in x-vsr-selected-model the model whose failure ended it, else the
last call made in the executor's own order (never whichever task the scheduler ran last). The answer's ``model``
is the answering call's own, as its provider named it, as a static or escalate answer relays it. A streamed
request gets the answer once it exists, as one held stream: these executors must have every answer before they
write theirs.
"""
from __future__ import annotations

from collections.abc import Sequence

import msgspec
import trio

from ...config.algorithm import Algorithm, Fusion, WorkflowFinal, WorkflowRole, Workflows
from ...config.schema import ProviderModel
from ...errors import echoing, CallsSpent, KeyNotAllowed, LooperBudgetExhausted, LooperCallsFailed, RequestError, UpstreamError
from ...headers import registry as h
from ...protocol.translate import dropped, sf_string
from ...protocol.untooled import without_tools
from ...selection import accept as checks
from ...selection import synthesis as syn
from ...selection.cost import Tally, Tokens
from ...upstream import Attempt, Stream, Whole
from ...upstream import cut as cut_attempts
from ...upstream.dispatch import CallBudget
from .exchange import Exchange
from .looper import Rewrite, Spent, Tune, count_tokens, fixed, metric, note, nothing, prepaid, spent_on

_DECODE = msgspec.json.Decoder()
# The causes of an attempt that never reached its backend (``upstream.transport.cause``).
_UNREACHABLE = frozenset({"connect_refused", "connect_timeout", "connect_error", "dns_error", "tls_error"})
_MAX_TOKENS = {"openai": "max_tokens", "anthropic": "max_tokens", "responses": "max_output_tokens"}
_TEMPERATURE_MAX = {"anthropic": 1.0}      # Anthropic's 0-1; OpenAI's 0-2 is the configuration's own bound


class Calls:
    """One executor's calls: their requests, the shared budget, their cost, attempts and verdicts."""

    def __init__(self, ex: Exchange, alg: Algorithm, candidates: Sequence[ProviderModel], build: Rewrite,
                 tally: Tally) -> None:
        self.ex, self.build, self.tally = ex, build, tally
        self.models = {m.name: m for m in candidates}
        self.reaches = ex.state.identity(ex.scope).reaches
        budget = alg.budget
        self.at = ex.arrived + budget.deadline_ms / 1000 if budget is not None and budget.deadline_ms else ex.deadline
        self.max_calls = budget.max_calls if budget is not None else None
        self.calls = CallBudget(self.max_calls)
        self.fail = alg.on_error == "fail"
        self.attempts: list[Attempt] = []
        self.verdicts: list[str] = []
        # What a failed run names in x-vsr-selected-model, the same every run: the model whose failure ended it
        # (on_error: fail), else the last call made in the executor's own order (a panel's in job order, however
        # its calls were scheduled). ``slots`` numbers the calls in that order.
        self.slots = 0
        self.last: tuple[int, str] | None = None
        self.ended_by: str | None = None
        self.backends: dict = {}
        # Models whose every backend refused or failed the connection: not asked again in this request (a
        # fusion judge that is also on the panel), as LiteLLM cools a deployment down after a connection failure.
        self.unreachable: set[str] = set()
        self.used = Tokens()        # every call's usage, summed: the answer's usage
        self.body = syn.plain_body(ex.req.raw) if ex.req is not None else {}
        # Every call leaves the tools out (``with_prompt``): the client hears of it as of any field not carried.
        ex.losses += without_tools(self.body, ex.api)[1]
        # Chat's n: each call answers once (the executor writes its one answer, ratings one per model), so no
        # candidate is left out for a choice count it could not carry; the client is told n was not honoured.
        n = self.body.pop("n", None) if ex.api == "chat" else None
        if isinstance(n, int) and n > 1:
            ex.losses.append(dropped("n"))
        self.original = ex.adapter.canonical(ex.req).text if ex.req is not None else ""

    def required(self, name: str | None, what: str) -> None:
        """KeyNotAllowed (403, before any call) when the key cannot reach ``name``, a model the executor needs;
        a 400 naming the field when ``name`` is not among this request's candidates."""
        if name is not None and not self.reaches(name):
            raise echoing(KeyNotAllowed, f"this key may not reach {{}}, the {what}", name, param="model")
        if name is not None and name not in self.models:
            raise echoing(RequestError, f"{{}}, the {what}, is not among this request's candidates "
                                        f"({', '.join(self.models)})", name, param="model")

    def reachable(self, names: Sequence[str], what: str) -> list[bool]:
        """Which of ``names`` the key reaches (and this request's candidates hold); each it does not is named in
        x-vsr-warnings and the trace. KeyNotAllowed (403, before any call) when it reaches none of them."""
        kept = [self.reaches(n) for n in names]
        if not any(kept):
            raise KeyNotAllowed(f"this key may reach none of the {what} ({', '.join(names)})", param="model")
        for name in dict.fromkeys(n for n, ok in zip(names, kept) if not ok):
            self.ex.codes.append(f"model_not_allowed;model={sf_string(name)}")
            self.verdicts.append(f"{name}: not allowed for this key, skipped")
        held = [ok and n in self.models for n, ok in zip(names, kept)]
        if not any(held):
            raise RequestError(f"none of the {what} ({', '.join(names)}) is among this request's candidates",
                               param="model")
        for name in dict.fromkeys(n for n, ok, h in zip(names, kept, held) if ok and not h):
            self.verdicts.append(f"{name}: not a candidate of this request, skipped")
        return held

    def exhausted(self) -> str | None:
        if self.calls.spent():
            return f"max_calls ({self.max_calls}) spent"
        if trio.current_time() >= self.at:
            return "the deadline passed"
        return None

    def _slot(self, count: int = 1) -> int:
        first = self.slots
        self.slots += count
        return first

    def _calling(self, slot: int, name: str) -> None:
        """A call is made: the error names it if it is the last in the executor's order (``last``)."""
        if self.last is None or slot > self.last[0]:
            self.last = (slot, name)
        if self.ended_by is None:
            self.ex.model = self.last[1]

    async def ask(self, name: str, prompt: str | None, *, temperature: float | None = None,
                  max_tokens: int | None = None, agent: str | None = None,
                  slot: int | None = None) -> syn.Reply | None:
        """One whole answer of model ``name`` to the request (``prompt``, when given, as its last turn); None when
        it failed (on_error: skip) or the budget ran out. ``slot``: its place in the executor's order (a panel's)."""
        slot = self._slot() if slot is None else slot
        model = self.models.get(name)
        if model is None:           # held off by ``required`` and ``reachable``: never a 500
            self.verdicts.append(f"{name}: not a candidate of this request, skipped")
            return None
        spent = self.exhausted()
        if spent is not None:
            self.verdicts.append(f"{name}: not called, {spent}")
            return None
        if name in self.unreachable:
            self.verdicts.append(f"{agent or name}: not called, its connection failed earlier in this request")
            return None
        outbound = await self.build(model, syn.with_prompt(self.body, self.ex.api, prompt),
                                    _tuning(temperature, max_tokens))
        self._calling(slot, name)
        failure = None
        with trio.move_on_at(self.at) as cut:
            try:
                whole = await self.ex.state.dispatcher.whole((model,), fixed(outbound), [], self.calls.take)
            except CallsSpent:
                self.verdicts.append(f"{name}: not called, max_calls ({self.max_calls}) spent")
                return None
            except UpstreamError as exc:
                self.attempts += exc.attempts
                failure = exc.code
                if exc.attempts and all(a.cause in _UNREACHABLE for a in exc.attempts):
                    self.unreachable.add(name)
            except trio.Cancelled:
                # A sibling's failure, the quorum, the request's deadline: the verdict says which (this executor's
                # own budget says "cut by the budget" below).
                if trio.current_time() < self.at:
                    self.verdicts.append(f"{agent or name}: {cut_attempts.cause(self.ex.deadline)}")
                raise
        if cut.cancelled_caught:
            failure = "cut by the budget"
            self.attempts += cut_attempts.taken()     # started, so recorded with its outcome
        if failure is not None:
            return self._failed(name, failure)
        self.attempts += whole.attempts
        self.backends[name] = whole.backend
        if whole.status >= 400:
            return self._failed(name, f"HTTP {whole.status}")
        tokens = Tokens()
        tokens.read(whole.body)
        self.charge(model, tokens, whole.attempts)
        text = checks.answer_text(whole.body, model.api_format, False)
        if not text or not text.strip():
            return self._failed(name, "no usable answer")
        self.verdicts.append(f"{agent or name}: answered")
        return syn.Reply(name, text, tokens.input, tokens.output, agent, syn.provider_model(whole.body))

    def charge(self, model: ProviderModel, tokens: Tokens, attempts: list[Attempt]) -> None:
        """One call's usage: its cost, its tokens under its own model, charged to the caller as it ends (a run
        that fails later has spent it), on its attempt (the record's) and summed into the answer's usage."""
        spent_on(attempts, tokens)
        self.tally.add(model, tokens)
        count_tokens(self.ex, model.name, tokens)
        if tokens.seen:
            self.used.seen = True
            self.used.input += tokens.input
            self.used.output += tokens.output

    def _failed(self, name: str, why: str) -> None:
        self.verdicts.append(f"{name}: {why}")
        if self.fail:
            if self.ended_by is None:
                self.ended_by = self.ex.model = name
            raise LooperCallsFailed(f"{name} failed ({why}) and on_error is fail")
        # Skipped (on_error: skip): the answer stands without it, and the client is told which model failed.
        code = f"looper_call_failed;model={sf_string(name)}"
        if code not in self.ex.codes:
            self.ex.codes.append(code)
        return None

    async def panel(self, jobs: Sequence[tuple[str, str | None, str | None]], limit: int, quorum: int | None = None,
                    **tuning) -> list[syn.Reply]:
        """The jobs (model, prompt, agent) at most ``limit`` at a time; their answers in job order. Once ``quorum``
        answered, the rest are cancelled."""
        results: list[syn.Reply | None] = [None] * len(jobs)
        base = self._slot(len(jobs))
        gate = trio.CapacityLimiter(max(1, limit))
        answered = 0
        failed: list[LooperCallsFailed] = []

        async def one(i: int, nursery: trio.Nursery) -> None:
            nonlocal answered
            name, prompt, agent = jobs[i]
            async with gate:
                try:
                    results[i] = await self.ask(name, prompt, agent=agent, slot=base + i, **tuning)
                except LooperCallsFailed as exc:     # on_error: fail: the others are cancelled, this one raised
                    failed.append(exc)
                    nursery.cancel_scope.cancel()
            if results[i] is not None:
                answered += 1
                if quorum is not None and answered >= quorum:
                    nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            for i in range(len(jobs)):
                nursery.start_soon(one, i, nursery)
        self.attempts += cut_attempts.taken()     # the calls the quorum or a failure cancelled
        if failed:
            raise failed[0]
        return [r for r in results if r is not None]

    def none_answered(self, what: str) -> LooperCallsFailed | LooperBudgetExhausted:
        spent = self.exhausted()
        if spent is not None:
            return LooperBudgetExhausted(f"the {what}'s budget ran out: {spent} ({'; '.join(self.verdicts)})")
        return LooperCallsFailed(f"no call of the {what} answered ({'; '.join(self.verdicts)})")


def _tuning(temperature: float | None, max_tokens: int | None) -> Tune | None:
    """An executor's sampling settings over the request's own (they win, as in vLLM Semantic Router), written in
    the model's format before the shaping plugins, so request_params bounds them as it bounds a client's; a
    temperature above the model's API range is clamped to it, as translation clamps a client's."""
    if temperature is None and max_tokens is None:
        return None

    def tune(raw: bytes, model: ProviderModel) -> bytes:
        body = _DECODE.decode(raw)
        api_format = model.api_format
        if temperature is not None:
            body["temperature"] = min(temperature, _TEMPERATURE_MAX.get(api_format, temperature))
        if max_tokens is not None:
            key = _MAX_TOKENS.get(api_format, "max_tokens")
            if api_format == "openai":
                # The model's own field: Ollama and LM Studio ignore max_completion_tokens, OpenAI's reasoning
                # models refuse max_tokens; the client's value in the other field would be a second limit.
                key = model.max_tokens_field
                body.pop("max_tokens" if key == "max_completion_tokens" else "max_completion_tokens", None)
            body[key] = max_tokens
        return msgspec.json.encode(body)
    return tune


def answer_of(calls: Calls, answer: syn.Answer, algorithm: str, streamed: bool) -> Stream | Whole:
    """The executor's answer as an openai model's (the client's protocol is reached by translation): a Whole, or
    a stream held whole; reported as the model that wrote it."""
    ex = calls.ex
    model = msgspec.structs.replace(calls.models[answer.model], api_format="openai")
    backend = calls.backends[answer.model]
    # The usage of every call (the planner's, a judge's, one whose answer was unusable): each was charged and
    # counted as it ended, so the meter reads this sum without charging it again.
    answer.input_tokens, answer.output_tokens = calls.used.input, calls.used.output
    if ex.meter is not None:
        ex.meter.prepaid = True
    if streamed and ex.api != "chat":
        # Held whole, so the header can say what the translation will drop: the choices past the first.
        ex.losses += [dropped(f"choices[{i}]") for i in range(1, len(answer.choices))]
    ex.path = h.ResponsePath.LOOPER
    ex.tried(calls.attempts, hops=True)
    note(ex, "looper", calls.verdicts)
    metric(ex, calls.tally)
    if streamed:
        return Stream(model, backend, 200, "text/event-stream", syn.chat_stream(answer, algorithm), nothing(),
                      Spent(), calls.attempts)
    return Whole(model, backend, 200, syn.chat_whole(answer, algorithm), "application/json", calls.attempts)


# --- the executors ---------------------------------------------------------------------------------------


async def ratings(calls: Calls, alg: Algorithm, streamed: bool) -> Stream | Whole:
    """Every candidate answers (at most ``max_concurrent`` at a time); one choice per model, in modelRefs order."""
    names = list(calls.models)
    limit = alg.ratings.max_concurrent if alg.ratings is not None and alg.ratings.max_concurrent else len(names)
    replies = await calls.panel([(n, None, None) for n in names], limit)
    if not replies:
        raise calls.none_answered("ratings")
    answer = syn.Answer(replies[0].model, [(r.text, r.model) for r in replies],
                        extension={"models": [r.model for r in replies]}, served_as=replies[0].served_as)
    return answer_of(calls, answer, "ratings", streamed)


async def remom(calls: Calls, alg: Algorithm, refs: Sequence[tuple[str, float]], streamed: bool) -> Stream | Whole:
    """``breadth_schedule`` rounds then one final call; each round after the first reads the previous one's
    answers. A round that fails leaves the previous round's longest answer (on_error: skip)."""
    cfg = alg.remom
    assert cfg is not None
    calls.required(cfg.synthesis_model, "remom synthesis_model")
    schedule = [*cfg.breadth_schedule, 1]
    rounds: list[list[syn.Reply]] = []
    for k, breadth in enumerate(schedule):
        last = k == len(schedule) - 1
        names = [cfg.synthesis_model] if last and cfg.synthesis_model else \
            syn.distribute(breadth, refs, cfg.model_distribution, cfg.shuffle_seed)
        prompt = None if k == 0 else syn.remom_prompt(cfg.synthesis_template, calls.original, rounds[-1],
                                                      cfg.compaction_strategy, cfg.compaction_tokens)
        quorum = cfg.min_successful_responses if cfg.min_successful_responses else None
        replies = await calls.panel([(n, prompt, None) for n in names], cfg.max_concurrent or len(names), quorum,
                                    temperature=cfg.temperature, max_tokens=cfg.max_completion_tokens)
        if not replies:
            if rounds and not calls.fail:
                break
            raise calls.none_answered("remom")
        if not last:
            replies = syn.ordered(replies, cfg.shuffle_seed)[:cfg.max_responses_per_round or None]
        rounds.append(replies)
    final = rounds[-1][0] if len(rounds) == len(schedule) else syn.longest(rounds)
    assert final is not None
    extension = {"rounds": [{"round": i + 1, "breadth": schedule[i],
                             "responses": [{"model": r.model, "content": r.text} for r in replies]}
                            for i, replies in enumerate(rounds)]} if cfg.include_intermediate_responses else {}
    answer = syn.Answer(final.model, [(final.text, final.model)], extension=extension, served_as=final.served_as)
    return answer_of(calls, answer, "remom", streamed)


async def fusion(calls: Calls, alg: Algorithm, streamed: bool) -> Stream | Whole:
    """The panel answers, the judge analyses the answers (JSON; prose is used as text, and said), then writes the
    final answer from both; a judge that fails it leaves the panel's first answer (on_error: skip)."""
    cfg = alg.fusion or Fusion()
    calls.required(cfg.model, "fusion judge (fusion.model)")
    panel = list(dict.fromkeys(cfg.analysis_models or calls.models))
    panel = [m for m, ok in zip(panel, calls.reachable(panel, "fusion analysis_models")) if ok]
    judge = cfg.model or panel[0]
    tuning = {"temperature": cfg.temperature, "max_tokens": cfg.max_completion_tokens}
    replies = await calls.panel([(m, None, None) for m in panel], cfg.max_concurrent or len(panel),
                                cfg.min_successful_responses, **tuning)
    if not replies:
        raise calls.none_answered("fusion panel")
    analysis: dict | str | None = None
    if cfg.analysis_mode == "separate":
        judged = await calls.ask(judge, syn.fusion_analysis_prompt(cfg.analysis_template, calls.original, replies),
                                 **tuning)
        if judged is not None:
            analysis = syn.parse_analysis(judged.text)
            if analysis is None:
                # Not the JSON asked for: its text still informs the final answer, and the trace and the client's
                # warnings say so rather than dropping it unseen.
                analysis = judged.text
                calls.verdicts.append(f"{judge}: analysis not JSON, used as text")
                calls.ex.codes.append(f"fusion_analysis_not_json;model={sf_string(judge)}")
    final = await calls.ask(judge, syn.fusion_final_prompt(cfg.synthesis_template, calls.original, replies, analysis),
                            **tuning)
    extension: dict = {"judge_model": judge, "analysis_models": panel,
                       "failed_models": [m for m in panel if m not in {r.model for r in replies}]}
    if final is None:
        # The judge's answer failed (on_error: skip): the panel answered, so its first answer stands (the
        # workflows' rule), said in the trace, the warnings and the body's extension, rather than an error.
        final = replies[0]
        extension["fallback"] = {"model": final.model, "why": "the judge's final answer failed"}
        calls.verdicts.append(f"{judge}: final answer failed, {final.model}'s panel answer stands")
        calls.ex.codes.append(f"fusion_judge_failed;model={sf_string(judge)}")
    if cfg.include_analysis:
        extension["analysis"] = analysis
    if cfg.include_intermediate_responses:
        extension["responses"] = [{"model": r.model, "content": r.text} for r in replies]
    answer = syn.Answer(final.model, [(final.text, final.model)], extension=extension, served_as=final.served_as)
    return answer_of(calls, answer, "fusion", streamed)


async def workflows(calls: Calls, alg: Algorithm, streamed: bool) -> Stream | Whole:
    """Each role in order: its models in parallel (``max_parallel``), each reading the request, the role's
    instruction and the earlier outputs its ``access_list`` allows; then the final model merges every output."""
    w: Workflows | None = alg.workflows
    assert w is not None
    steps: list[syn.Step] = []
    tuning = {"temperature": w.temperature, "max_tokens": w.max_completion_tokens}
    roles, final_cfg, plan = w.roles, w.final, None
    if w.mode == "static":      # a dynamic workflow's final model is its plan's
        calls.required(w.final.model, "workflow's final model")
    # Before any call: each role's members the key reaches (an agent keeps its index among the role's models).
    members = [[j for j, ok in enumerate(calls.reachable(r.models, f"{r.name} role's models")) if ok] for r in roles]
    if w.mode == "dynamic":
        roles, final_cfg, plan = await _planned(calls, w)
        members = [list(range(len(r.models))) for r in roles]     # the plan names only reachable candidates
    for role, kept in zip(roles, members):
        prompt = syn.step_prompt(calls.original, role.name, role.prompt, syn.visible(steps, role.access_list))
        jobs = [(role.models[j], prompt, f"{role.name}:{j}:{role.models[j]}") for j in kept]
        replies = await calls.panel(jobs, w.max_parallel, w.min_successful_responses, **tuning)
        if not replies:
            raise calls.none_answered(f"workflow's {role.name} role")
        steps.append(syn.Step(role.name, role.prompt, replies))
    final_model = final_cfg.model or roles[-1].models[members[-1][0]]
    final = await calls.ask(final_model, syn.workflow_final_prompt(calls.original, final_cfg.prompt, steps), **tuning)
    if final is None:
        final = steps[-1].replies[0]        # on_error: skip: the last role's first answer stands
    extension = {"steps": [{"role": s.role, "responses": [{"agent": r.agent, "model": r.model, "content": r.text}
                                                          for r in s.replies]} for s in steps]} \
        if w.include_intermediate_responses else {}
    if plan is not None:
        extension["plan"] = plan
    answer = syn.Answer(final.model, [(final.text, final.model)], extension=extension, served_as=final.served_as)
    return answer_of(calls, answer, "workflows", streamed)


async def _planned(calls: Calls, w: Workflows) -> tuple[list[WorkflowRole], WorkflowFinal, dict]:
    """The dynamic workflow's roles, as its planner wrote them; a plan that cannot run (unreadable, or naming a
    model outside the modelRefs) fails the request under on_error: fail, else one fallback_solve step of every
    candidate runs."""
    names = list(calls.models)
    calls.required(w.planner.model, "workflow's planner model")
    planner = w.planner.model or names[0]
    reply = await calls.ask(planner, syn.plan_prompt(calls.original, names, w.max_steps),
                            max_tokens=w.planner.max_completion_tokens)
    why = "the planner did not answer"
    if reply is not None:
        try:
            roles, final = syn.parse_plan(reply.text, names, w.max_steps)
            return roles, final, {"planner": planner, "steps": [r.name for r in roles], "fallback": False}
        except ValueError as exc:
            why = str(exc)
    calls.verdicts.append(f"{planner}: plan refused, {why}")
    if calls.fail:
        raise LooperCallsFailed(f"the workflow's plan could not run: {why}")
    fallback = [WorkflowRole(name="fallback_solve", models=names)]
    return fallback, WorkflowFinal(), {"planner": planner, "steps": ["fallback_solve"], "fallback": True, "why": why}


async def run(ex: Exchange, kind: str, alg: Algorithm, candidates: Sequence[ProviderModel],
              refs: Sequence[tuple[str, float]], build: Rewrite, streamed: bool, tally: Tally) -> Stream | Whole:
    """The executor ``kind`` over the decision's candidates."""
    calls = Calls(ex, alg, candidates, build, tally)
    try:
        if kind == "ratings":
            return await ratings(calls, alg, streamed)
        if kind == "remom":
            return await remom(calls, alg, refs, streamed)
        if kind == "fusion":
            return await fusion(calls, alg, streamed)
        return await workflows(calls, alg, streamed)
    except LooperCallsFailed as exc:
        if calls.ended_by is None:
            raise
        # on_error: fail ended it: the error names every call made and what became of it, not the failed one only.
        raise LooperCallsFailed(f"{exc.message} (calls: {'; '.join(calls.verdicts)})") from None
    finally:
        if ex.path != h.ResponsePath.LOOPER:       # failed before it answered: still record what it called
            prepaid(ex)
            ex.tried([*calls.attempts, *cut_attempts.taken()], hops=True)
            note(ex, "looper", calls.verdicts)
            metric(ex, calls.tally)
