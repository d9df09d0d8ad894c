"""A causal LM served behind an OpenAI-compatible API by LitServe (PyPI ``litserve``), as a
team serves a transformers model: ``/v1/chat/completions`` through LitServe's ``OpenAISpec``
(streaming and not) and ``/v1/completions`` through a plain ``LitAPI`` answering the
completions schema. Greedy decoding with ``model.generate``; streaming yields the text the
tokens add, one token at a time.

Run by tests/serving/openai_server.py inside the LitServe virtualenv (its own: LitServe pins
fastapi, uvicorn, pyzmq...), never imported by the project. The chat endpoint takes the last
user message as the raw prompt (the tiny test model has no chat template).

    python litserve_llm.py --serve NAME=DIR [--serve NAME=DIR ...] --port P

The request's ``model`` field picks the model.
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any, Iterator

import litserve as ls
import torch
from litserve.specs.openai import OpenAISpec


class _Greedy:
    """The model, its tokenizer and one greedy decode, shared by both endpoints."""

    def __init__(self, directory: str) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(1)
        self.tokenizer = AutoTokenizer.from_pretrained(directory)
        self.model = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager").eval()

    def tokens(self, prompt: str, max_new_tokens: int) -> Iterator[str]:
        """The text each new token adds (greedy, KV cache, stops at EOS)."""
        ids = self.tokenizer(prompt, return_tensors="pt")
        past, step_ids, mask = None, ids["input_ids"], ids["attention_mask"]
        produced: list[int] = []
        shown = ""
        with torch.inference_mode():
            for _ in range(max_new_tokens):
                out = self.model(input_ids=step_ids, attention_mask=mask, past_key_values=past, use_cache=True)
                past = out.past_key_values
                token = int(out.logits[0, -1].argmax())
                produced.append(token)
                if token == self.tokenizer.eos_token_id:
                    break
                text = self.tokenizer.decode(produced, skip_special_tokens=True)
                yield text[len(shown):]
                shown = text
                step_ids = torch.tensor([[token]])
                mask = torch.cat([mask, torch.ones((1, 1), dtype=mask.dtype)], dim=1)


class ChatAPI(ls.LitAPI):
    def __init__(self, models: dict[str, str]) -> None:
        super().__init__(spec=OpenAISpec())
        self.models = models

    def setup(self, device: str) -> None:
        self.greedy = {name: _Greedy(directory) for name, directory in self.models.items()}

    def predict(self, request: Any, context: dict[str, Any]) -> Iterator[str]:
        prompt = next(m.content for m in reversed(request.messages) if m.role == "user")
        limit = request.max_completion_tokens or request.max_tokens or 16
        yield from self.greedy[request.model].tokens(prompt if isinstance(prompt, str) else str(prompt), int(limit))


class CompletionsAPI(ls.LitAPI):
    def __init__(self, models: dict[str, str]) -> None:
        super().__init__(api_path="/v1/completions")
        self.models = models

    def setup(self, device: str) -> None:
        self.greedy = {name: _Greedy(directory) for name, directory in self.models.items()}

    def decode_request(self, request):  # type: ignore[no-untyped-def]  # unannotated: LitServe passes the JSON body
        return request

    def predict(self, request: dict[str, Any]) -> dict[str, str]:
        greedy = self.greedy[str(request["model"])]
        return {"model": str(request["model"]),
                "text": "".join(greedy.tokens(str(request["prompt"]), int(request.get("max_tokens") or 16)))}

    def encode_response(self, answer: dict[str, str]) -> dict[str, Any]:
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": answer["model"], "choices": [{"index": 0, "text": answer["text"], "finish_reason": "stop"}]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="append", required=True, help="NAME=MODEL_DIR (a transformers causal LM)")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    models = dict(item.split("=", 1) for item in args.serve)
    server = ls.LitServer([ChatAPI(models), CompletionsAPI(models)], accelerator="cpu",
                          workers_per_device=1, timeout=120)
    server.run(host="127.0.0.1", port=args.port, generate_client_file=False, num_api_servers=1)


if __name__ == "__main__":
    main()
