"""Output contracts (spec 5.8): the Struct, the load checks and the run-time rules."""
from __future__ import annotations

import msgspec
import pytest

from vsr_fast.config.output import (
    ImageGenerationForbidden, ImageRouteRequired, ModelFacts, Output, UnsupportedCapability, image_route_required,
    image_generation_forbidden, image_tool_plan, output_capability_missing, output_not_executable, refusal,
    required_capabilities, unsupported_capability,
)

DECISION = "recipes[default].decisions[0]"
MODELS = {
    "omni": ModelFacts.of("omni", "responses", ["chat", "vision", "image_generation"],
                          {"input": ["text", "image"], "output": ["text", "image"]}),
    "painter": ModelFacts.of("painter", "images", ["image_generation"], {"input": ["text"], "output": ["image"]}),
    "chatter": ModelFacts.of("chatter", "openai", ["chat"]),
    "plain": ModelFacts.of("plain"),
    "painter-on-chat": ModelFacts.of("painter-on-chat", "openai", [], {"output": ["image"]}),
    "speaker": ModelFacts.of("speaker", "openai", ["audio_output"]),
}


def test_output_struct_decodes_strictly():
    assert msgspec.convert({"kind": "image", "action": "generate"}, Output).kinds == {"image"}
    assert msgspec.convert({"kind": ["text", "image"]}, Output).kinds == {"text", "image"}
    assert Output().kinds == {"text"} and Output().action == "generate"
    for bad, path in (({"kind": "smell"}, "kind"), ({"kind": []}, "kind"), ({"action": "paint"}, "action")):
        with pytest.raises(msgspec.ValidationError, match=f"`\\$.{path}`"):
            msgspec.convert(bad, Output)
    with pytest.raises(msgspec.ValidationError, match="unknown field `colour`"):
        msgspec.convert({"kind": "image", "colour": "red"}, Output)


def test_required_capabilities_follow_the_spec():
    assert required_capabilities(None) == ["text_output"]
    assert required_capabilities(Output(kind="image")) == ["image_generation"]
    assert required_capabilities(Output(kind="image", action="edit")) == ["image_generation", "image_input"]
    assert required_capabilities(Output(kind=["text", "image"])) == ["text_output", "image_generation"]
    assert required_capabilities(Output(kind="video", action="edit")) == ["video_output", "video_input"]
    assert required_capabilities(Output(kind="audio")) == ["audio_output"]


def test_model_facts_come_from_capabilities_and_modalities():
    assert MODELS["omni"].declares("image_input")   # vision is an alias
    assert MODELS["painter-on-chat"].declares("image_generation")   # image in modalities.output
    assert not MODELS["painter"].declares("text_output")
    assert MODELS["plain"].declares("text_output") and MODELS["chatter"].declares("text_output")
    assert not ModelFacts.of("x", capabilities=["image_generation"]).declares("text_output")
    assert not MODELS["chatter"].declares("image_generation")


def test_output_capability_missing_names_model_and_capability():
    assert output_capability_missing(DECISION, Output(kind="image"), ["omni", "painter"], MODELS) == []
    assert output_capability_missing(DECISION, Output(kind="image"), ["omni", "chatter"], MODELS) == [
        f"{DECISION}.modelRefs[1]: output_capability_missing:image_generation: model 'chatter' does not "
        "declare image_generation (in capabilities, or image in modalities.output)"]
    # A list needs one model that declares all of it.
    lines = output_capability_missing(DECISION, Output(kind=["text", "image"]), ["painter", "omni"], MODELS)
    assert lines == [f"{DECISION}.modelRefs[0]: output_capability_missing:text_output: model 'painter' does not "
                     "declare text_output (its modalities.output leaves out text)"]
    # No contract: text, so an image-only model fails.
    assert [line.split(": ")[1] for line in output_capability_missing(DECISION, None, ["painter"], MODELS)] == [
        "output_capability_missing:text_output"]
    edit = output_capability_missing(DECISION, Output(kind="image", action="edit"), ["painter"], MODELS)
    assert [line.split(": ")[1] for line in edit] == ["output_capability_missing:image_input"]
    assert output_capability_missing(DECISION, Output(kind="image"), ["undeclared"], MODELS) == []


def test_output_not_executable_names_the_codec_executor_or_api():
    assert output_not_executable(DECISION, None, "escalate", ["chatter"], MODELS) == []
    assert output_not_executable(DECISION, Output(kind="image"), "static", ["omni", "painter"], MODELS) == []
    codes = lambda lines: [line.split(": ")[:2] for line in lines]  # noqa: E731
    assert codes(output_not_executable(DECISION, Output(kind="audio"), None, ["speaker"], MODELS)) == [
        [f"{DECISION}.output", "output_not_executable"]]
    assert "audio output codec" in output_not_executable(DECISION, Output(kind="audio"), None, [], MODELS)[0]
    assert "video codec" in output_not_executable(DECISION, Output(kind="video"), None, [], MODELS)[0]
    assert "image edit codec" in output_not_executable(DECISION, Output(kind="image", action="edit"), None, [],
                                                       MODELS)[0]
    executor = output_not_executable(DECISION, Output(kind="image"), "escalate", ["omni"], MODELS)
    assert executor == [f"{DECISION}.algorithm: output_not_executable: the escalate executor's model calls "
                        "answer in text only, so it cannot produce image output"]
    api = output_not_executable(DECISION, Output(kind="image"), None, ["painter-on-chat"], MODELS)
    assert api == [f"{DECISION}.modelRefs[0]: output_not_executable: model 'painter-on-chat' speaks api_format "
                   "openai, which cannot carry image output; it needs api_format images or responses"]
    both = output_not_executable(DECISION, Output(kind=["text", "image"]), None, ["painter", "omni"], MODELS)
    assert len(both) == 1 and "needs api_format responses" in both[0] and "'painter'" in both[0]


@pytest.mark.parametrize(("api", "output", "tool_choice", "refused"), [
    ("images", None, None, ImageRouteRequired),
    ("images", Output(), None, ImageRouteRequired),
    ("images", Output(kind="image"), None, None),
    ("images", Output(kind=["text", "image"]), None, None),
    ("chat", Output(kind="image"), None, UnsupportedCapability),
    ("messages", Output(kind=["text", "image"]), None, UnsupportedCapability),
    ("chat", None, None, None),
    ("messages", Output(), None, None),
    ("responses", Output(kind="image"), "none", ImageGenerationForbidden),
    ("responses", Output(kind="image"), "auto", None),
    ("responses", Output(kind=["text", "image"]), "none", None),
    ("responses", None, "none", None),
])
def test_run_time_rules(api, output, tool_choice, refused):
    got = refusal(api, output, tool_choice)
    if refused is None:
        assert got is None
        return
    assert type(got) is refused and got.status == 400
    assert got.code == got.message.split(":")[0]


def test_each_rule_alone():
    err = image_route_required("images", None)
    assert err.code == "image_route_required" and err.type == "invalid_request_error"
    assert unsupported_capability("chat", Output(kind="image")).message.startswith(
        "unsupported_capability: the decision answers with image output, which the Chat Completions API")
    assert image_generation_forbidden("responses", Output(kind="image"), "none").param == "tool_choice"
    assert image_route_required("chat", None) is None


def test_image_tool_plan():
    assert image_tool_plan("responses", Output(kind="image"), [], None) == (True, True)
    assert image_tool_plan("responses", Output(kind="image"), ["image_generation"], "auto") == (False, True)
    assert image_tool_plan("responses", Output(kind="image"), [], "required") == (True, False)
    assert image_tool_plan("responses", Output(kind=["text", "image"]), ["function"], None) == (True, False)
    assert image_tool_plan("responses", None, [], None) == (False, False)
    assert image_tool_plan("chat", Output(kind="image"), [], None) == (False, False)
