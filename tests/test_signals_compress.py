"""compress.signals' extractive cut (signals/compress.py): within budget, in order, profile words first."""
from __future__ import annotations

from vsr_fast.protocol.chat import Message
from vsr_fast.signals.base import CanonicalRequest
from vsr_fast.signals.compress import SignalsView

FILLER = [f"Sentence {i} is about the tomatoes in my garden." for i in range(40)]


def test_a_turn_within_budget_is_the_request_itself():
    request = CanonicalRequest([Message(role="user", content="Short.")])
    assert SignalsView("default", 64, ()).view(request) is request


def test_the_cut_keeps_its_budget_and_order_and_each_profile_its_words():
    text = " ".join([*FILLER[:20], "The function raised a stack trace error.", *FILLER[20:]])
    default = SignalsView("default", 64, ()).compress(text)
    coding = SignalsView("coding", 64, ()).compress(text)
    assert len(default) <= 64 * 4 and len(coding) <= 64 * 4
    assert "stack trace" not in default and "stack trace" in coding
    assert default.startswith("Sentence 0 ") and default.endswith("Sentence 39 is about the tomatoes in my garden.")
    recent = SignalsView("multi_turn", 64, ()).compress(" ".join(FILLER))
    assert "Sentence 39 " in recent and "Sentence 0 " not in recent


def test_the_view_replaces_the_current_turn_only():
    earlier = Message(role="user", content=" ".join(FILLER))
    request = CanonicalRequest([earlier, Message(role="assistant", content="ok"),
                                Message(role="user", content=" ".join(FILLER))])
    view = SignalsView("default", 64, ["jailbreak"]).view(request)
    assert view is not request and len(view.text) <= 64 * 4
    assert view.history == request.history and request.text == " ".join(FILLER)
