"""A filter is typed against the deployed definitions in one place
(`Engine.typed_filter`), for `GET /v1/executions?where=`, the archive's
listing and batches alike. With several servers on one store, a server
learns of a deploy made through another on its next round; a filter asked
of it before then must not be refused as naming a workflow or fields it
does not know (batches failed that way in CI, in shared mode, under load;
the two listings did too, until the typing moved into the engine)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import falcon.testing
import pytest

from orbit_core.engine import Engine
from orbit_core.memory_store import MemoryStore
from orbit_core.testing import simulated_engine
from orbit_lang.compiler import compile_files
from orbit_server.app import create_app
from orbit_server.archive import DirectoryArchive
from orbit_server.batches import Filter
from orbit_server.config import ServerConfig
from orbit_server.retention import Sweeper

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "visibility.orbit"
WHERE = 'customer == "c-1" and amount > 500'


@pytest.fixture
def engines() -> Iterator[tuple[Engine, Engine]]:
    """`here` and `there` on one store; `Orders` deployed through `there`."""
    store = MemoryStore()
    here = simulated_engine(store)
    there = simulated_engine(store)
    for definition in compile_files([EXAMPLE]):
        there.deploy(definition)
    yield here, there
    here.close()
    there.close()


def test_a_batch_types_its_filter_with_a_workflow_deployed_elsewhere(
    engines: tuple[Engine, Engine],
) -> None:
    here, _there = engines
    chosen = Filter.parse({"workflow": "Orders", "where": WHERE})
    assert chosen.typed(here) is not None


@pytest.mark.parametrize("path", ["/v1/executions", "/v1/archive/executions"])
@pytest.mark.parametrize("workflow", [None, "Orders"])
def test_the_listings_type_their_filter_with_a_workflow_deployed_elsewhere(
    engines: tuple[Engine, Engine], tmp_path: Path, path: str, workflow: str | None
) -> None:
    here, _there = engines
    sweeper = Sweeper(None, DirectoryArchive(tmp_path), 10**9, clock=lambda: 0)
    client = falcon.testing.TestClient(create_app(here, ServerConfig(), retention=sweeper))
    query = f"where={quote(WHERE)}" + (f"&workflow={workflow}" if workflow else "")
    answer = client.simulate_get(path, query_string=query)
    assert answer.status_code == 200, answer.json
    assert answer.json["executions"] == []


def test_a_field_nobody_declared_is_still_refused(engines: tuple[Engine, Engine]) -> None:
    here, _there = engines
    client = falcon.testing.TestClient(create_app(here, ServerConfig()))
    answer = client.simulate_get("/v1/executions", query_string="where=nosuch%20%3D%3D%201")
    assert answer.status_code == 400
    assert answer.json["error"]["code"] == "INVALID_FILTER"
    assert "nosuch" in answer.json["error"]["message"]
