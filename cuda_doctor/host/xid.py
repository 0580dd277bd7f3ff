"""Xid events since boot, judged with NVIDIA's Xid catalog (``rules/data/xid.toml``).

Each event is tied to the GPU at its PCI address and to the catalog's immediate action. Events
that need a GPU reset or a reboot (``derived.xid.node_*``) are the node's problem; those that
need only the application restarted (``derived.xid.app_*``) are the application's.
"""

from __future__ import annotations

from typing import Any

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.host.kernel_log import bus_address
from cuda_doctor.tables import load_table

#: The catalog's immediate actions that are the node's problem, the worst first (Xid 48's
#: workflow resets the GPU: alone RESET_GPU, with Xid 63 or 64 drain and reset).
NODE_ACTIONS = ("RESTART_BM", "RESET_GPU", "WORKFLOW_XID_48")
#: Those that are the application's alone.
APP_ACTIONS = ("RESTART_APP", "IGNORE")


def describe(event: dict[str, Any], catalog: dict[str, Any], gpu: int | None, uptime: float | None) -> str:
    """ "Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: GPU has fallen off the bus) on GPU 0
    (0000:06:00), 4 min after boot, 3 h ago" """
    row = catalog.get(str(event["code"]), {})
    what = f"{row.get('mnemonic', 'not in the catalog')}: {row['description']}" if row else "not in the catalog"
    where = f"GPU {gpu} ({event['pci']})" if gpu is not None else f"{event['pci']}, a GPU NVML does not list"
    text = f"Xid {event['code']} ({what}) on {where}"
    at = event.get("at_s")
    if isinstance(at, (int, float)):
        text += f", {_span(at)} after boot"
        if uptime is not None and uptime >= at:
            text += f", {_span(uptime - at)} ago"
    return text


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def derive(facts: Facts) -> None:
    if not facts.has("kernel_log.xids"):
        reason = facts.unknown_reason("kernel_log.xids")
        facts.mark_all_unknown(("derived.xid.node_state", "derived.xid.app_events"), reason)
        return
    catalog: dict[str, Any] = load_table("xid").get("xid", {})
    listed = facts.has("gpu.count")  # NVML (or nvidia-smi) listed the GPUs: one missing is gone
    addresses = {bus_address(str(facts.get(indexed("gpu", i, "pci_bus_id")) or "")): i for i in facts.indices("gpu")}
    uptime = facts.get("kernel_log.uptime_s")
    node: list[str] = []
    states: list[str] = []  # per node event: gone | needed | unconfirmed | recovered
    pending: list[tuple[str, int | None]] = []  # (action, GPU) of the events not recovered
    app: list[str] = []
    other: list[str] = []
    for event in facts.get("kernel_log.xids") or []:
        gpu = addresses.get(event.get("pci"))
        action = catalog.get(str(event.get("code")), {}).get("immediate", "")
        text = describe(event, catalog, gpu, uptime if isinstance(uptime, (int, float)) else None)
        if action in APP_ACTIONS:
            app.append(text)
        elif action not in NODE_ACTIONS:
            other.append(f"{text}: {action or 'not in the catalog'}")
        else:
            node.append(f"{text}: {action}")
            recovery = None if gpu is None else facts.get(indexed("gpu", gpu, "recovery_action"))
            if gpu is None:
                states.append("gone" if listed else "unconfirmed")
            elif recovery == "none":
                states.append("recovered")  # the driver says the GPU needs nothing now
                continue
            else:
                states.append("unconfirmed" if recovery is None else "needed")
            pending.append((action, gpu))
    state = next((s for s in ("gone", "needed", "unconfirmed", "recovered") if s in states), "none")
    facts.set("derived.xid.node_events", node)
    facts.set("derived.xid.node_state", state)
    facts.set("derived.xid.recovery_command", _recovery_command(pending))
    facts.set("derived.xid.app_events", app)
    facts.set("derived.xid.other_events", other)
    fatal = [s for s in facts.get("kernel_log.sxids") or [] if str(s.get("text", "")).startswith("Fatal")]
    facts.set(
        "derived.xid.sxid_fatal",
        [f"SXid {s['code']} on NVSwitch {s['switch']} ({s['pci']}): {s['text']}" for s in fatal],
    )


def _recovery_command(pending: list[tuple[str, int | None]]) -> str:
    """A reboot when any event needs one or took its GPU away, else a reset of the GPUs named."""
    if any(action == "RESTART_BM" or gpu is None for action, gpu in pending):
        return "sudo reboot"
    gpus = sorted({gpu for _action, gpu in pending if gpu is not None})
    return f"sudo nvidia-smi -r -i {gpus[0]}" if len(gpus) == 1 else "sudo nvidia-smi -r"


def derive_live(facts: Facts) -> None:
    """``derived.smoke.xid_events``: the Xids NVML delivered during the smoke run, in words."""
    out = "derived.smoke.xid_events"
    events = facts.get("smoke.xid_events")
    if not isinstance(events, list):
        facts.mark_unknown(out, facts.unknown_reason("smoke.xid_events"))
        return
    catalog: dict[str, Any] = load_table("xid").get("xid", {})
    texts = []
    for event in events:
        row = catalog.get(str(event.get("xid")), {})
        what = (
            f"{row['mnemonic']}: {row['description']}, catalog action {row['immediate']}"
            if row
            else "not in the catalog"
        )
        texts.append(
            f"GPU {event.get('gpu')} raised Xid {event.get('xid')} ({what}) {event.get('after_s')} s into the run"
        )
    facts.set(out, texts)
