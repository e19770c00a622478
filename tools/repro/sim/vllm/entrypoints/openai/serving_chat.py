"""Simulated vllm.entrypoints.openai.serving_chat: the /v1/chat/completions handler."""
import itertools


class OpenAIServingChat:
    """Renders the chat request into a prompt, runs it through the engine client and builds the
    response (the full one here: no streaming)."""

    _ids = itertools.count()

    def __init__(self, engine_client, model_name):
        """The handler over an engine client (AsyncLLM)."""
        self.engine_client = engine_client
        self.model_name = model_name

    async def create_chat_completion(self, request, raw_request=None):
        """Chat Completion API similar to OpenAI's API: tokenizes the messages, starts the
        engine client's generate() and returns the full response."""
        request_id = f"chatcmpl-{next(self._ids):032x}"
        prompt_token_ids = [ord(c) % 256 for c in request["messages"][-1]["content"]]
        result_generator = self.engine_client.generate(
            prompt_token_ids, {"max_tokens": request["max_tokens"]}, request_id)
        return await self.chat_completion_full_generator(request, result_generator, request_id)

    async def chat_completion_full_generator(self, request, result_generator, request_id):
        """Iterates the engine's outputs to the last one and makes the response."""
        final_res = None
        async for res in result_generator:
            final_res = res
        return {"id": request_id, "model": self.model_name, "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant",
                                         "content": " ".join(map(str, final_res.token_ids))}}]}
