"""Prometheus text metrics, kept in plain dicts.

Hand-written rather than prometheus_client: the hot path pays one dict update
per sample and no lock (each worker process is single-threaded on trio), and
each worker exposes its own series, as the router's workers share nothing.
"""
from __future__ import annotations

import bisect
import time
from collections import defaultdict

Labels = tuple[str, ...]

# Up to the default request timeout (limits.request_timeout_ms, 600 s): a long generation is not lumped in +Inf.
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                     120.0, 300.0, 600.0)


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Labels, values: Labels, extra: str = "") -> str:
    parts = [f'{n}="{escape(v)}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class Counter:
    def __init__(self, name: str, doc: str, labels: Labels) -> None:
        self.name, self.doc, self.label_names = name, doc, labels
        self.values: dict[Labels, float] = defaultdict(float)

    def inc(self, *labels: str, by: float = 1.0) -> None:
        self.values[labels] += by

    def render(self) -> list[str]:
        out = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} counter"]
        out += [f"{self.name}{_labels(self.label_names, k)} {_number(v)}" for k, v in sorted(self.values.items())]
        return out


def _number(value: float) -> str:
    """A sample value exactly: ``:g`` kept six digits, so a counter past 999,999 read 1.23457e+06."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class Histogram:
    def __init__(self, name: str, doc: str, labels: Labels, buckets: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self.name, self.doc, self.label_names, self.buckets = name, doc, labels, buckets
        self.counts: dict[Labels, list[int]] = {}
        self.sums: dict[Labels, float] = defaultdict(float)

    def observe(self, value: float, *labels: str) -> None:
        counts = self.counts.get(labels)
        if counts is None:
            counts = self.counts[labels] = [0] * (len(self.buckets) + 1)
        counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sums[labels] += value

    def render(self) -> list[str]:
        out = [f"# HELP {self.name} {self.doc}", f"# TYPE {self.name} histogram"]
        for key, counts in sorted(self.counts.items()):
            running = 0
            for bound, n in zip((*self.buckets, float("inf")), counts):
                running += n
                le = 'le="+Inf"' if bound == float("inf") else f'le="{bound:g}"'
                out.append(f"{self.name}_bucket{_labels(self.label_names, key, le)} {running}")
            out.append(f"{self.name}_sum{_labels(self.label_names, key)} {self.sums[key]:.6f}")
            out.append(f"{self.name}_count{_labels(self.label_names, key)} {running}")
        return out


class Metrics:
    """Every series the router exports."""

    def __init__(self) -> None:
        self.requests = Counter(
            "vsr_requests_total", "Requests by route and HTTP status (a stream that ends with an error event after "
            "its 200: the status of that error, as a whole answer of it has).",
            ("api", "recipe", "decision", "model", "status")
        )
        self.responses = Counter(
            "vsr_responses_total", "Answers by how they were produced, as x-vsr-response-path said (upstream, "
            "cache, fast_response, looper, fallback: a later candidate than the first, blocked, rate_limited, "
            "error...).", ("api", "path")
        )
        self.recovered = Counter(
            "vsr_recovered_answers_total", "Model answers served after a failed attempt of the same request, by "
            "the model that answered and how: retry (another attempt at it) or failover (an earlier model failed).",
            ("api", "model", "how")
        )
        self.latency = Histogram(
            "vsr_request_duration_seconds", "Request latency until the last byte.", ("api", "decision", "model")
        )
        self.first_byte = Histogram(
            "vsr_time_to_first_byte_seconds", "From the request's first byte to the answer's first byte "
            "(a stream's first event: time to first token).", ("api", "model")
        )
        self.tokens = Counter(
            "vsr_tokens_total", "Tokens of the answers' usage, by model and direction (input, output).",
            ("model", "direction")
        )
        self.tokens_estimated = Counter(
            "vsr_tokens_estimated_total", "The part of vsr_tokens_total the router estimated (four bytes a token of "
            "the request's and the answer's text) for answers whose backend reported no usage.",
            ("model", "direction")
        )
        self.upstream_attempts = Counter(
            "vsr_upstream_attempts_total", "Upstream attempts by backend and outcome: ok, the cause "
            "vsr_upstream_errors_total counts (a stream by how it ended: midstream_<cause> once it had started), or "
            "deadline or cancelled for one a deadline or a cancellation (its client gone) cut, a stream's too.",
            ("model", "backend", "outcome")
        )
        self.upstream_errors = Counter(
            "vsr_upstream_errors_total", "Upstream failures by backend and cause (connect_refused, read_timeout, "
            "status_5xx...; midstream_<cause> once a stream had started).", ("model", "backend", "cause")
        )
        self.disconnects = Counter(
            "vsr_client_disconnects_total", "Clients that left before their answer ended.", ("api",)
        )
        self.timeouts = Counter(
            "vsr_request_timeouts_total", "Requests cut by their deadline, by the stage it passed in.", ("api", "stage")
        )
        self.rate_limited = Counter(
            "vsr_rate_limited_total", "Requests refused with 429 by a key's, team's or tenant's limit.",
            ("api", "scope", "limit")
        )
        self.team_requests = Counter(
            "vsr_team_requests_total", "Requests by the caller's team: a team the configuration names (a declared "
            "key's or rate_limits.teams), else \"other\" (stored keys' teams would be unbounded).", ("team",)
        )
        self.team_tokens = Counter(
            "vsr_team_tokens_total", "Tokens charged by the caller's team (as vsr_team_requests_total labels it).",
            ("team",)
        )
        self.auth_failures = Counter(
            "vsr_auth_failures_total", "Requests refused for their key (missing, invalid, not allowed).", ("api", "code")
        )
        self.judge_truncated = Counter(
            "vsr_match_judge_truncated_total", "Judges that read only their first max_candidates.", ("feature",)
        )
        self.match_recall = Counter(
            "vsr_match_recall_total", "Match recall stages run, by feature, method and outcome (hit: kept any).",
            ("feature", "method", "outcome")
        )
        self.match_judge = Counter(
            "vsr_match_judge_total", "Match judge calls, by feature and outcome (ok, error, skipped).",
            ("feature", "outcome")
        )
        self.match_stage = Histogram(
            "vsr_match_stage_duration_seconds", "Time in each match stage.", ("feature", "stage"),
            (0.00005, 0.0001, 0.00025, 0.0005, *LATENCY_BUCKETS_S)    # recall takes microseconds
        )
        self.context_sources = Counter(
            "vsr_context_sources_total", "Context sources run, by source and outcome (injected, empty, failed).",
            ("source", "outcome")
        )
        self.memory_writes = Counter(
            "vsr_context_memory_writes_total", "Turns written to a user's memory after the response, by outcome.",
            ("outcome",)
        )
        self.guard_buffered = Counter(
            "llm_response_guard_buffered_total", "Streamed answers held for the response guard, by outcome.",
            ("decision_name", "outcome")
        )
        self.cost = Counter(
            "vsr_cost_total", "What answers cost at their models' pricing, per call.", ("decision", "model", "currency")
        )
        self.guard_outcomes = Counter(
            "vsr_response_guard_outcomes_total", "Answers the response guard read, by outcome and stream kind.",
            ("decision_name", "outcome", "stream")
        )

        self.http_refusals = Counter(
            "vsr_http_refusals_total", "Requests the connection layer refused before any route read them (not valid "
            "HTTP: 400, headers too slow: 408, head too large: 431, a transfer coding other than chunked: 501), by "
            "status.", ("status",)
        )
        self.off_loop = Counter(
            "vsr_off_loop_steps_total", "A big body's request steps run in a worker thread, off the event loop, by "
            "step (decode, signals, record, upstream, shaping, masking, cache).", ("step",)
        )
        self.reloads = Counter(
            "vsr_config_reloads_total", "Configuration reloads by outcome (ok, unchanged, failed).", ("outcome",)
        )

        # The last load of the file (the start's, until a reload): whether it took, and when (Unix seconds).
        self.last_reload: tuple[bool, float] = (True, time.time())

    def reloaded(self, ok: bool) -> None:
        """A reload's outcome (an unchanged file is a success), for ``config_lines``."""
        self.last_reload = (ok, time.time())

    def config_lines(self, version: str) -> list[str]:
        """Which configuration serves (``vsr_config_info``, its hash as ``version``) and how the last reload went,
        as Prometheus' own ``prometheus_config_last_reload_successful`` says it."""
        ok, at = self.last_reload
        return ["# HELP vsr_config_info The configuration in effect, by its version hash (always 1).",
                "# TYPE vsr_config_info gauge", f'vsr_config_info{{version="{escape(version)}"}} 1',
                "# HELP vsr_config_last_reload_success Whether the last reload (or the start's load) took (1) "
                "or was refused (0).", "# TYPE vsr_config_last_reload_success gauge",
                f"vsr_config_last_reload_success {int(ok)}",
                "# HELP vsr_config_last_reload_timestamp_seconds When the last reload (or the start's load) ran, "
                "in Unix seconds.", "# TYPE vsr_config_last_reload_timestamp_seconds gauge",
                f"vsr_config_last_reload_timestamp_seconds {_number(at)}"]

    def render(self, *extra: list[str]) -> bytes:
        lines: list[str] = []
        for series in (self.requests, self.responses, self.recovered, self.latency, self.first_byte, self.tokens, self.tokens_estimated,
                       self.upstream_attempts, self.upstream_errors, self.disconnects,
                       self.timeouts, self.rate_limited, self.team_requests, self.team_tokens, self.auth_failures,
                       self.judge_truncated,
                       self.match_recall, self.match_judge, self.match_stage, self.context_sources,
                       self.memory_writes, self.guard_buffered, self.guard_outcomes, self.cost, self.http_refusals,
                       self.off_loop, self.reloads):
            lines += series.render()
        for more in extra:
            lines += more
        return ("\n".join(lines) + "\n").encode()
