"""The input-items listing of a stored response: which items it lists, their ids, its pages."""
from __future__ import annotations

import msgspec
import pytest

from vsr_fast.errors import InvalidValue
from vsr_fast.protocol.responses import StoredResponse
from vsr_fast.server import input_items


def record(items: list, output: list, response_id: str = "resp_a") -> StoredResponse:
    raw = msgspec.json.encode
    return StoredResponse(response_id, msgspec.Raw(raw(items + output)), "m", "alice",
                          msgspec.Raw(raw({"id": response_id, "object": "response", "output": output})))


CARRIED = [{"role": "user", "content": "Hi"},
           {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Hello", "annotations": []}]}]
OWN = [{"role": "user", "content": "Bye"}, {"type": "function_call_output", "call_id": "c1", "output": "42"}]
ANSWER = [{"type": "message", "id": "msg_2", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]


def test_the_listing_is_the_input_less_the_responses_own_output_each_item_with_an_id():
    listed = input_items.input_items(record(CARRIED + OWN, ANSWER))
    assert [i["id"] for i in listed][1] == "msg_1" and "msg_2" not in [i["id"] for i in listed]
    assert listed[0] == {"id": listed[0]["id"], "type": "message", "role": "user",
                         "content": [{"type": "input_text", "text": "Hi"}], "status": "completed"}
    assert listed[0]["id"].startswith("msg_") and listed[3]["id"].startswith("item_")
    assert listed[3]["type"] == "function_call_output" and "status" not in listed[3]
    again = input_items.input_items(record(CARRIED + OWN, ANSWER))
    assert [i["id"] for i in again] == [i["id"] for i in listed]          # a cursor names the same item twice
    other = input_items.input_items(record(CARRIED + OWN, ANSWER, "resp_b"))
    assert other[0]["id"] != listed[0]["id"]                                 # ids are each response's own


def test_a_page_after_the_last_item_is_empty():
    items = input_items.input_items(record(OWN, ANSWER))
    q = input_items.Query(limit=5, order="asc", after=items[-1]["id"])
    assert msgspec.json.decode(input_items.page(items, q, "resp_a")) == {
        "object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}


@pytest.mark.parametrize(("args", "param"), [({"limit": "1.5"}, "limit"), ({"limit": "-1"}, "limit"),
                                             ({"order": "ASC"}, "order"), ({"include": "x"}, "include")])
def test_query_refusals_name_the_parameter(args, param):
    with pytest.raises(InvalidValue) as info:
        input_items.query(args, lambda name: [args[name]] if name in args else [])
    assert info.value.param == param
