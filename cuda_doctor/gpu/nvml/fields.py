"""The NVML field values the GPU probe asks in batches, one ``nvmlDeviceGetFieldValues`` round
trip per batch, instead of one driver call per fact.

Ids are nvml.h's ``NVML_FI_DEV_*`` numbers (nvidia-ml-py 13.615.71, pynvml.py); they never change
and new fields only ever get larger ids.  This module imports nothing, so the early opener
(which runs before ``pynvml`` is imported) asks exactly what the probe will ask.

Each field stands for an older per-function call that gives the same value (nvml.h's own
descriptions): the probe asks the function whenever its field is not answered, so a driver that
predates a field (it answers NOT_SUPPORTED for that one entry) reads the same facts.  Except
where the driver answered a newer field of the same GPU: it knows the older one, so its
NOT_SUPPORTED is the GPU's own (the H200 keeps no retired-pages flag, Blackwell no NVLink
replay counter), and asking the function would be one more round trip for the same answer.
"""

from __future__ import annotations

#: Current ECC mode, 1 = on: ``nvmlDeviceGetEccMode``'s current mode.
ECC_CURRENT = 1
#: Volatile double-bit ECC errors: nvml.h defines NVML_MEMORY_ERROR_TYPE_UNCORRECTED as the
#: double-bit errors, so this is ``nvmlDeviceGetTotalEccErrors(UNCORRECTED, VOLATILE)``.
ECC_DBE_VOLATILE = 4
#: Pages pending retirement, 1 = yes: ``nvmlDeviceGetRetiredPagesPendingStatus``.
RETIRED_PENDING = 31
#: Number of NVLinks the GPU has.
NVLINK_LINK_COUNT = 91
#: Row remapping pending / failed: ``nvmlDeviceGetRemappedRows``' last two answers.
REMAPPED_PENDING = 144
REMAPPED_FAILURE = 145
#: Per NVLink (the link's number as scope): replay, recovery and CRC error counters, and the
#: link's state; ``nvmlDeviceGetNvLinkErrorCounter`` / ``nvmlDeviceGetNvLinkState``.
NVLINK_REPLAY = 161
NVLINK_RECOVERY = 162
NVLINK_CRC = 163
NVLINK_STATE = 165
#: What the driver asks for after a fault; there is no function for it.
GPU_RECOVERY_ACTION = 230

#: The first batch of every GPU: memory health, the recovery action, the number of NVLinks.
GPU_BATCH: tuple[int, ...] = (
    ECC_CURRENT,
    ECC_DBE_VOLATILE,
    RETIRED_PENDING,
    REMAPPED_PENDING,
    REMAPPED_FAILURE,
    GPU_RECOVERY_ACTION,
    NVLINK_LINK_COUNT,
)

#: Asked for each link of a GPU that has NVLinks, in a second batch: its state, then its counters.
LINK_FIELDS: tuple[int, ...] = (NVLINK_STATE, NVLINK_REPLAY, NVLINK_RECOVERY, NVLINK_CRC)

#: NVML_NVLINK_STATE_* (the values of NVLINK_STATE) and the names the facts use for them.
NVLINK_STATES: dict[int, str] = {0: "inactive", 1: "active", 2: "sleep", 3: "traffic_disabled"}


def link_batch(links: int) -> list[tuple[int, int]]:
    """The second batch for a GPU with ``links`` NVLinks: (field, link) pairs, link by link."""
    return [(field, link) for link in range(links) for field in LINK_FIELDS]


def gpu_lacks(field: int, not_supported: bool, newest: int) -> bool:
    """A field answered NOT_SUPPORTED by a driver that answered a newer one: the GPU does not
    have that reading, and its function would say so too."""
    return not_supported and field < newest
