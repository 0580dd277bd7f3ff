"""NVML field values asked in batches (one ``nvmlDeviceGetFieldValues`` round trip each) by nvml.h's
``NVML_FI_DEV_*`` ids, newer fields with larger ones; a field not answered is asked by its older function."""

from __future__ import annotations

#: Current ECC mode, 1 = on: ``nvmlDeviceGetEccMode``'s current mode.
ECC_CURRENT = 1
#: Volatile double-bit ECC errors: ``nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)``.
ECC_DBE_VOLATILE = 4
#: Pages pending retirement, 1 = yes: ``nvmlDeviceGetRetiredPagesPendingStatus``.
RETIRED_PENDING = 31
#: Number of NVLinks the GPU has.
NVLINK_LINK_COUNT = 91
#: Row remapping pending / failed: ``nvmlDeviceGetRemappedRows``' last two answers.
REMAPPED_PENDING = 144
REMAPPED_FAILURE = 145
#: Per NVLink (its number as scope): ``nvmlDeviceGetNvLinkErrorCounter``s and ``nvmlDeviceGetNvLinkState``.
NVLINK_REPLAY = 161
NVLINK_RECOVERY = 162
NVLINK_CRC = 163
NVLINK_STATE = 165
#: What the driver asks for after a fault; there is no function for it.
GPU_RECOVERY_ACTION = 230

#: The first batch of every GPU: memory health, the recovery action, the number of NVLinks.
GPU_BATCH: tuple[int, ...] = (
    ECC_CURRENT, ECC_DBE_VOLATILE, RETIRED_PENDING, REMAPPED_PENDING, REMAPPED_FAILURE,
    GPU_RECOVERY_ACTION, NVLINK_LINK_COUNT,
)  # fmt: skip

#: Asked for each link of a GPU that has NVLinks, in a second batch: its state, then its counters.
LINK_FIELDS: tuple[int, ...] = (NVLINK_STATE, NVLINK_REPLAY, NVLINK_RECOVERY, NVLINK_CRC)

#: NVML_NVLINK_STATE_* (the values of NVLINK_STATE) and the names the facts use for them.
NVLINK_STATES: dict[int, str] = {0: "inactive", 1: "active", 2: "sleep", 3: "traffic_disabled"}


def link_batch(links: int) -> list[tuple[int, int]]:
    """The second batch for a GPU with ``links`` NVLinks: (field, link) pairs, link by link."""
    return [(field, link) for link in range(links) for field in LINK_FIELDS]


def gpu_lacks(field: int, not_supported: bool, newest: int) -> bool:
    """NOT_SUPPORTED from a driver that answered a newer field: the GPU itself lacks the reading."""
    return not_supported and field < newest
