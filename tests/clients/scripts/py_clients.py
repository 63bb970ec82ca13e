"""One tool round trip with a Python agent library, as its documentation shows it; prints the final answer.

Runs in the clients' own venv (``.clients/venv``), never in the project's:

    python py_clients.py CLIENT API MODE BASE_URL MODEL

CLIENT is openai-agents, langchain-openai or pydantic-ai; API chat, responses or messages
(pydantic-ai's Anthropic model); MODE stream or whole. The one tool, ``get_weather``, answers
``sunny in <city>``; the library calls it when the model asks and sends the result back.
"""
from __future__ import annotations

import asyncio
import sys

KEY = "sk-vsr-client-test"
PROMPT = "Use your first tool once, then answer."
INSTRUCTIONS = "You answer questions about the weather."


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"sunny in {city}"


async def openai_agents(api: str, stream: bool, base_url: str, model: str) -> str:
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool
    from agents import set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)   # the default uploads traces to OpenAI
    client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=0)
    kind = OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel
    agent = Agent(name="weather", instructions=INSTRUCTIONS, tools=[function_tool(get_weather)],
                  model=kind(model=model, openai_client=client))
    if stream:
        result = Runner.run_streamed(agent, PROMPT)
        async for _ in result.stream_events():
            pass
        return str(result.final_output)
    return str((await Runner.run(agent, PROMPT)).final_output)


async def langchain_openai(api: str, stream: bool, base_url: str, model: str) -> str:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    weather = tool(get_weather)
    llm = ChatOpenAI(model=model, base_url=f"{base_url}/v1", api_key=KEY, max_retries=0,
                     use_responses_api=api == "responses", streaming=stream).bind_tools([weather])
    messages: list = [HumanMessage(PROMPT)]

    async def ask():
        if not stream:
            return await llm.ainvoke(messages)
        whole = None
        async for piece in llm.astream(messages):
            whole = piece if whole is None else whole + piece
        return whole

    answer = await ask()
    messages.append(answer)
    if not answer.tool_calls:
        raise SystemExit(f"the model called no tool: {answer!r}")
    for call in answer.tool_calls:
        messages.append(ToolMessage(await weather.ainvoke(call["args"]), tool_call_id=call["id"]))
    final = await ask()
    return final.text if isinstance(final.text, str) else final.text()


async def pydantic_ai(api: str, stream: bool, base_url: str, model: str) -> str:
    from pydantic_ai import Agent

    if api == "messages":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider
        llm = AnthropicModel(model, provider=AnthropicProvider(base_url=base_url, api_key=KEY))
    else:
        from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider
        kind = OpenAIResponsesModel if api == "responses" else OpenAIChatModel
        llm = kind(model, provider=OpenAIProvider(base_url=f"{base_url}/v1", api_key=KEY))
    agent = Agent(llm, instructions=INSTRUCTIONS, tools=[get_weather])
    if stream:
        # run_stream() ends at the first text the model streams, even one before a tool call (as
        # documented); an event stream handler streams every model request of a run to its end.
        async def drain(ctx, events) -> None:
            async for _ in events:
                pass
        return (await agent.run(PROMPT, event_stream_handler=drain)).output
    return (await agent.run(PROMPT)).output


CLIENTS = {"openai-agents": openai_agents, "langchain-openai": langchain_openai, "pydantic-ai": pydantic_ai}


def main() -> None:
    client, api, mode, base_url, model = sys.argv[1:6]
    print(asyncio.run(CLIENTS[client](api, mode == "stream", base_url, model)))


if __name__ == "__main__":
    main()
