"""Translation between the client protocols (chat, messages, responses, images) and the
backend API formats (openai, anthropic, responses, images), through neutral forms.

``vsr_fast.protocol.adapters`` is the one user of this package; its docstring says
how the server drives it. Here: the per-protocol readers and writers, keyed by
backend API format, and the loss record.
"""
from . import _chat, _guarded, _images, _messages, _responses
from ._chat import chat_messages as chat_messages
from ._common import NewId as NewId
from ._fields import client_param as client_param
from ._common import is_error_of as is_error_of
from ._common import new_id as new_id
from ._common import read_error as read_error
from ._ir import Answer as Answer
from ._ir import ToolCall as ToolCall
from ._common import parse_arguments as parse_arguments
from ._ir import Conversation as Conversation
from ._ir import NoTurns as NoTurns
from ._ir import answer_events as answer_events
from ._ir import events_answer as events_answer
from ._losses import WARNINGS_LIMIT_BYTES as WARNINGS_LIMIT_BYTES
from ._losses import Loss as Loss
from ._losses import dropped as dropped
from ._losses import render_warnings as render_warnings
from ._losses import sf_string as sf_string
from ._sse import SSEParser as SSEParser
from ._ir import Usage as Usage
from ._stream import Estimate as Estimate
from ._stream import Passthrough as Passthrough
from ._stream import StreamTranslator as StreamTranslator
from ._stream import Translating as Translating
from ._stream import WholeToStream as WholeToStream

# Backend API format -> the module that reads and writes it.
CHAT, MESSAGES, RESPONSES, IMAGES = _chat, _messages, _responses, _images
GUARDED = _guarded   # the response guard's reading and noting of answers
BY_FORMAT = {"openai": _chat, "anthropic": _messages, "responses": _responses}
PATHS = {"openai": _chat.PATH, "anthropic": _messages.PATH, "responses": _responses.PATH, "images": _images.PATH}
DEFAULT_MAX_TOKENS = _messages.DEFAULT_MAX_TOKENS

__all__ = [
    "Answer", "BY_FORMAT", "CHAT", "GUARDED", "Conversation", "DEFAULT_MAX_TOKENS", "Estimate", "IMAGES", "Loss",
    "MESSAGES", "NewId", "Usage",
    "NoTurns", "PATHS", "Passthrough", "RESPONSES", "SSEParser", "StreamTranslator", "Translating",
    "WARNINGS_LIMIT_BYTES", "WholeToStream", "answer_events", "events_answer", "chat_messages", "client_param", "dropped",
    "is_error_of", "new_id", "parse_arguments", "read_error", "ToolCall",
    "render_warnings", "sf_string",
]
