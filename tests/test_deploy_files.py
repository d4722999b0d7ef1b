"""deploy/: the files parse and agree with the code (event names, metric names, datasource uids).

Docker cannot run here, so these are static checks of what the stack would load.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from pipeline import events
from pipeline.metrics import CompactionMetrics

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "longcall-compaction.json"
EVENT_NAMES = set(events.EVENT_TYPES)
EVENT_TOKEN = re.compile(r"voice_context_compaction_[a-z_]+|context_window_pruned|realtime_instructions_built")


def load_yaml(relative: str) -> Any:
    return yaml.safe_load((DEPLOY / relative).read_text(encoding="utf-8"))


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def metric_names() -> set[str]:
    """Every sample name /metrics can produce, from the TYPE lines of a fresh render."""
    names: set[str] = set()
    for line in CompactionMetrics().render().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            names |= {name} if kind != "histogram" else {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def test_every_yaml_file_parses() -> None:
    """Each YAML file under deploy/ parses to a mapping."""
    files = sorted(DEPLOY.rglob("*.yml"))
    assert 6 == len(files)
    assert [dict] * len(files) == [type(yaml.safe_load(f.read_text(encoding="utf-8"))) for f in files]


def test_compose_services_and_loopback_ports() -> None:
    """Compose runs the whole stack, Redis with AOF, and publishes every port on loopback only."""
    compose = load_yaml("docker-compose.yml")
    services = compose["services"]
    assert {"longcall", "longcall-1", "redis", "prometheus", "loki", "promtail", "grafana"} == set(services)
    assert "--appendonly" in services["redis"]["command"]
    assert "yes" == services["redis"]["command"][services["redis"]["command"].index("--appendonly") + 1]
    published = [port for svc in services.values() for port in svc.get("ports", [])]
    assert [] == [p for p in published if not str(p).startswith("127.0.0.1:")]
    assert "deploy/Dockerfile" == services["longcall"]["build"]["dockerfile"]
    assert "json" == services["longcall"]["environment"]["LOG_FORMAT"]


def test_compose_runs_two_shard_processes_on_one_redis() -> None:
    """Two bot services: disjoint SHARD_IDS covering SHARD_COUNT, the same REDIS_URL, the same image."""
    from bot.settings import load_settings

    services = load_yaml("docker-compose.yml")["services"]
    bots = [services["longcall"], services["longcall-1"]]
    settings = [load_settings({k: str(v) for k, v in bot["environment"].items()}) for bot in bots]
    assert [(2, (0,)), (2, (1,))] == [(s.shard_count, s.shard_ids) for s in settings]
    assert 1 == len({s.redis_url for s in settings}) and 1 == len({bot["image"] for bot in bots})


def test_compose_mounts_exist() -> None:
    """Every file or folder compose bind-mounts from deploy/ exists."""
    compose = load_yaml("docker-compose.yml")
    sources = [
        v.split(":")[0] for svc in compose["services"].values() for v in svc.get("volumes", []) if v.startswith("./")
    ]
    assert [] == [s for s in sources if not (DEPLOY / s).exists()]


def test_prometheus_scrapes_the_dashboard() -> None:
    """Prometheus scrapes both bot processes' :8088/metrics."""
    (job,) = load_yaml("prometheus.yml")["scrape_configs"]
    assert ("/metrics", ["longcall:8088", "longcall-1:8088"]) == (job["metrics_path"],
                                                                 job["static_configs"][0]["targets"])


def test_promtail_labels_stay_low_cardinality() -> None:
    """promtail parses the JSON lines and labels only event, level and guild_id: session_id stays a field."""
    (job,) = load_yaml("promtail-config.yml")["scrape_configs"]
    stages = job["pipeline_stages"]
    labels = next(s["labels"] for s in stages if "labels" in s)
    assert {"event", "level", "guild_id"} == set(labels)
    assert any("json" in s for s in stages)
    assert "session_id" not in json.dumps(stages)


def test_loki_keeps_a_retention() -> None:
    """Loki is single-tenant on the filesystem with retention switched on."""
    loki = load_yaml("loki-config.yml")
    assert (False, True) == (loki["auth_enabled"], loki["compactor"]["retention_enabled"])


def test_dashboard_datasources_are_provisioned() -> None:
    """Every panel, target and variable names a datasource uid (and type) that provisioning creates."""
    sources = load_yaml("grafana/provisioning/datasources/datasources.yml")["datasources"]
    provisioned = {d["uid"]: d["type"] for d in sources}
    board = dashboard()
    refs = [p["datasource"] for p in board["panels"]]
    refs += [t["datasource"] for p in board["panels"] for t in p["targets"]]
    refs += [v["datasource"] for v in board["templating"]["list"] if "datasource" in v]
    assert [] == [r for r in refs if provisioned.get(r["uid"]) != r["type"]]
    assert {"prometheus", "loki"} == {r["type"] for r in refs}


def test_dashboard_provider_points_at_the_mounted_folder() -> None:
    """The dashboard provider reads the folder compose mounts the dashboards into."""
    (provider,) = load_yaml("grafana/provisioning/dashboards/dashboards.yml")["providers"]
    grafana = load_yaml("docker-compose.yml")["services"]["grafana"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in grafana["volumes"]


def test_dashboard_shape() -> None:
    """The dashboard JSON has a uid, schemaVersion 39, unique panel ids and a guild variable."""
    board = dashboard()
    ids = [p["id"] for p in board["panels"]]
    assert ("longcall-compaction", 39) == (board["uid"], board["schemaVersion"])
    assert sorted(set(ids)) == sorted(ids)
    assert ["guild_id"] == [v["name"] for v in board["templating"]["list"]]
    assert all(p["targets"] and p["gridPos"]["w"] <= 24 for p in board["panels"])


def test_dashboard_event_names_match_the_code() -> None:
    """Every event name a query uses is one of pipeline/events' declarations, and the logs panel covers all four
    compaction events."""
    used = {m for q in queries() for m in EVENT_TOKEN.findall(q)}
    assert set() == used - EVENT_NAMES
    logs = next(p for p in dashboard()["panels"] if p["type"] == "logs")
    compaction = {events.CompactionSkipped.name, events.CompactionStarted.name, events.CompactionCompleted.name,
                  events.CompactionFailed.name}
    assert compaction == set(EVENT_TOKEN.findall(logs["targets"][0]["expr"]))
    assert 'guild_id=~"$guild_id"' in logs["targets"][0]["expr"]


def test_dashboard_metric_names_exist() -> None:
    """Every longcall_* series a PromQL query uses is one /metrics actually exports."""
    used = {m for q in queries() for m in re.findall(r"\blongcall_[a-z_]+", q)}
    assert set() == used - metric_names()
    assert {"longcall_compaction_latency_seconds_bucket", "longcall_session_backlog_turns"} <= used


def test_dockerfile_is_slim_non_root_and_secret_free() -> None:
    """The image is python:3.11-slim, runs `longcall run` as a non-root user, and copies no .env or secret."""
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    instructions = [ln.split(None, 1) for ln in text.splitlines() if ln and not ln.startswith((" ", "#"))]
    first = {kw: arg for kw, arg in reversed(instructions)}
    assert "python:3.11-slim" == first["FROM"]
    assert first["USER"] not in {"root", "0"}
    assert ('["longcall"]', '["run"]') == (first["ENTRYPOINT"], first["CMD"])
    copies = [arg for kw, arg in instructions if kw == "COPY"]
    assert [] == [c for c in copies if c.split()[0] in {".", "./"} or ".env" in c]
    assert [] == re.findall(r"(?i)(DISCORD_TOKEN|OPENAI_API_KEY|REDIS_URL)\s*=", text)


def test_dashboard_has_the_operator_health_panels() -> None:
    """Grafana shows the same health figures as `longcall dashboard`'s tiles, from /metrics."""
    health = [p for p in dashboard()["panels"] if p["title"].startswith("Health:")]
    assert 4 == len(health)
    used = {m for p in health for t in p["targets"] for m in re.findall(r"\blongcall_[a-z_]+", t["expr"])}
    assert {
        "longcall_reply_latency_seconds_bucket", "longcall_asr_real_time_factor_bucket",
        "longcall_asr_lag_seconds_bucket",
        "longcall_compaction_latency_seconds_bucket", "longcall_compaction_failed_total", "longcall_redis_up",
    } <= used
