"""Workers for examples/agent.orbit, with a fake language model.

Every task of the research agent is served here. The "model" is a few
deterministic functions: a plan of one search per key word of the question,
a draft stitched from the search snippets, and a guardrail that is unsure of
any draft without citations. Swap `FakeModel` for your provider's client to
run the agent for real; the task contracts stay the same.

Run it against a server (with the agent deployed):

    ORBIT_SERVER=http://127.0.0.1:7233 python examples/workers/agent/agent_worker.py

The same functions run in-process under an embedded engine
(`HANDLERS`, for `Engine.register_handler`), which is how the repository's
test runs the agent end to end.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from orbit_sdk import TaskError

Input = dict[str, Any]

# Cost the fake model charges for each planned search, in US dollars.
COST_PER_QUERY = 0.05
STOP_WORDS = frozenset({"a", "an", "the", "of", "is", "what", "how", "why", "and", "to", "in"})


class FakeModel:
    """Stands in for a language model: same questions, same answers."""

    def plan(self, question: str, max_queries: int) -> list[str]:
        words = [w.strip("?.,!").lower() for w in question.split()]
        topics = [w for w in words if w and w not in STOP_WORDS]
        if not topics:
            raise TaskError("EMPTY_PLAN", "the model found nothing to search for", retryable=False)
        return [f"{topic} explained" for topic in topics][:max_queries]

    def draft(self, question: str, results: list[Input]) -> tuple[str, list[str]]:
        snippets = [s for r in results for s in r["snippets"]]
        sources = sorted({s for r in results for s in r["sources"]})
        text = f"{question} " + " ".join(snippets) if snippets else f"{question} No sources found."
        return text, sources

    def confidence(self, text: str, citations: list[str]) -> tuple[float, list[str]]:
        if not citations:
            return 0.3, ["no citations"]
        return 0.9, []


MODEL = FakeModel()
# What the fake "publishing service" holds: slug -> text.
PUBLISHED: dict[str, str] = {}
ALERTS: list[Input] = []


def plan(input: Input, ctx: Any = None) -> Input:
    queries = MODEL.plan(input["question"], input["max_queries"])
    return {"queries": queries, "estimated_cost_usd": round(COST_PER_QUERY * len(queries), 2)}


def search(input: Input, ctx: Any = None) -> Input:
    query = input["query"]
    topic = query.removesuffix(" explained")
    return {
        "query": query,
        "snippets": [f"{topic.capitalize()} is covered in the handbook."],
        "sources": [f"https://handbook.example.org/{topic}"],
    }


def draft(input: Input, ctx: Any = None) -> Input:
    text, citations = MODEL.draft(input["question"], input["results"])
    return {"text": text, "citations": citations}


def check(input: Input, ctx: Any = None) -> Input:
    confidence, flags = MODEL.confidence(input["text"], input["citations"])
    return {"confidence": confidence, "flags": flags}


def publish(input: Input, ctx: Any = None) -> Input:
    # The idempotency key makes a redelivered publish harmless; a dict write is too.
    PUBLISHED[input["slug"]] = input["text"]
    return {"url": f"https://blog.example.org/{input['slug']}"}


def unpublish(input: Input, ctx: Any = None) -> Input:
    return {"removed": PUBLISHED.pop(input["slug"], None) is not None}


def alert(input: Input, ctx: Any = None) -> Input:
    ALERTS.append(input)
    return {"sent": True}


HANDLERS: dict[str, Callable[..., Input]] = {
    "llm.plan": plan,
    "tools.search": search,
    "llm.draft": draft,
    "guardrails.check": check,
    "content.publish": publish,
    "content.unpublish": unpublish,
    "notifications.alert": alert,
}


def main() -> None:
    from orbit_sdk import Worker

    worker = Worker(
        "agent-workers",
        server=os.environ.get("ORBIT_SERVER", "http://127.0.0.1:7233"),
        token=os.environ.get("ORBIT_WORKER_TOKEN") or os.environ.get("ORBIT_TOKEN"),
    )
    for name, handler in HANDLERS.items():
        worker.task(name, version="1.0.0")(handler)
    worker.run()


if __name__ == "__main__":
    main()
