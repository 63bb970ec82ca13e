// One tool round trip with the official openai Node SDK; prints the final answer.
//
//   NODE_PATH=.clients/node_modules node openai_node.cjs API MODE BASE_URL MODEL
//
// API is chat or responses, MODE stream or whole. Streams go through the SDK's own stream
// helpers (chat.completions.stream, responses.stream), which check every event they read.
'use strict';
const OpenAI = require('openai');

const KEY = 'sk-vsr-client-test';
const PROMPT = 'Use your first tool once, then answer.';
const PARAMS = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const DESCRIPTION = 'The current weather in a city.';
const weather = (args) => `sunny in ${JSON.parse(args).city}`;

async function chat(client, stream, model) {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: DESCRIPTION, parameters: PARAMS } }];
  const messages = [{ role: 'user', content: PROMPT }];
  const ask = async () => {
    if (!stream) return (await client.chat.completions.create({ model, messages, tools })).choices[0].message;
    const s = client.chat.completions.stream({ model, messages, tools, stream_options: { include_usage: true } });
    return (await s.finalChatCompletion()).choices[0].message;
  };
  const first = await ask();
  if (!first.tool_calls || !first.tool_calls.length) throw new Error(`no tool call: ${JSON.stringify(first)}`);
  messages.push(first);
  for (const call of first.tool_calls) {
    messages.push({ role: 'tool', tool_call_id: call.id, content: weather(call.function.arguments) });
  }
  return (await ask()).content;
}

async function responses(client, stream, model) {
  const tools = [{ type: 'function', name: 'get_weather', description: DESCRIPTION, parameters: PARAMS, strict: false }];
  const input = [{ role: 'user', content: PROMPT }];
  const ask = async () => {
    if (!stream) return client.responses.create({ model, input, tools });
    return client.responses.stream({ model, input, tools }).finalResponse();
  };
  const first = await ask();
  const calls = first.output.filter((item) => item.type === 'function_call');
  if (!calls.length) throw new Error(`no tool call: ${JSON.stringify(first.output)}`);
  input.push(...first.output);
  for (const call of calls) {
    input.push({ type: 'function_call_output', call_id: call.call_id, output: weather(call.arguments) });
  }
  return (await ask()).output_text;
}

async function main() {
  const [api, mode, baseURL, model] = process.argv.slice(2);
  const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: KEY, maxRetries: 0 });
  const run = api === 'responses' ? responses : chat;
  console.log(await run(client, mode === 'stream', model));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
