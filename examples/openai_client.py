#!/usr/bin/env python3
"""examples/openai_client.py: `tallow serve` from the `openai` Python package.

    tallow serve -m models/SmolLM2-135M-Instruct.Q4_1.gguf --port 8080 &
    pip install openai
    python3 examples/openai_client.py [http://127.0.0.1:8080/v1]

A plain chat completion, the same streamed token by token, a stop string,
a tool call, and embeddings.
The server ignores the API key unless it was started with --api-key."""
import sys

from openai import OpenAI

base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080/v1"
client = OpenAI(base_url=base, api_key="unused-unless---api-key")
model = client.models.list().data[0].id

r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Name three colors."}],
                                   max_tokens=32, temperature=0)
print(r.choices[0].message.content)
print("usage:", r.usage)

stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Tell a short joke."}],
                                        max_tokens=48, stream=True, stream_options={"include_usage": True})
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
    if chunk.usage:
        print("\nusage:", chunk.usage)

r = client.completions.create(model=model, prompt="1, 2, 3,", max_tokens=32, temperature=0, stop=[" 6"])
print("stop:", repr(r.choices[0].text), r.choices[0].finish_reason)  # the text before " 6", "stop"

weather = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Weather in Paris?"}],
                                   tools=[weather], tool_choice="required", max_tokens=64, temperature=0)
call = r.choices[0].message.tool_calls[0]
print("tool call:", call.function.name, call.function.arguments)  # get_weather {"city":"Paris"}

e = client.embeddings.create(model=model, input=["a cat", "a dog"])
print("embeddings:", len(e.data), "x", len(e.data[0].embedding))
