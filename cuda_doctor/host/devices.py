"""The NVIDIA GPUs the kernel sees against those NVML lists, and the kernel module's flavour
against each GPU's architecture (NVIDIA driver installation guide, "Kernel Modules")."""

from __future__ import annotations

from cuda_doctor.core.facts import Facts, indexed
from cuda_doctor.host.kernel_log import bus_address
from cuda_doctor.tables.versions import major_minor

#: Drivers that take a GPU away from the NVIDIA driver on purpose: passed through to a VM.
PASSED_THROUGH = ("vfio-pci", "pci-stub")
#: What each bound driver means for a GPU NVML does not list.
WHY_UNSEEN = {
    "nvidia": "the NVIDIA driver could not initialise it (it fell off the bus, or failed at start)",
    "nouveau": "bound to nouveau, the open-source driver, so the NVIDIA driver cannot use it",
    None: "no driver is bound to it: the NVIDIA kernel module did not take it",
}
#: How each package family rebuilds the initramfs (after nouveau is blacklisted).
INITRAMFS = {"debian": "sudo update-initramfs -u", "rhel": "sudo dracut --force", "suse": "sudo dracut --force"}


def derive(facts: Facts) -> None:
    _unseen(facts)
    _flavour(facts)


def _unseen(facts: Facts) -> None:
    out = "derived.pci.unseen"
    if facts.get("container.detected") is True:
        facts.set("derived.pci.state", "container")  # NVML lists only the GPUs given to the container
        return
    if not facts.has("kernel.pci_gpus") or not facts.has("gpu.count"):
        missing = "kernel.pci_gpus" if not facts.has("kernel.pci_gpus") else "gpu.count"
        facts.mark_all_unknown((out, "derived.pci.state"), facts.unknown_reason(missing))
        return
    listed = {bus_address(str(facts.get(indexed("gpu", i, "pci_bus_id")) or "")) for i in facts.indices("gpu")}
    unseen = []
    nouveau = False
    for gpu in facts.get("kernel.pci_gpus") or []:
        driver = gpu.get("driver")
        if driver in PASSED_THROUGH or bus_address(str(gpu.get("address"))) in listed:
            continue
        why = WHY_UNSEEN.get(driver, f"bound to {driver}, not to the NVIDIA driver")
        unseen.append(f"{gpu.get('address')} (device {gpu.get('device')}): {why}")
        nouveau = nouveau or driver == "nouveau"
    facts.set(out, unseen)
    facts.set("derived.pci.state", "nouveau" if nouveau else "unseen" if unseen else "ok")
    family = facts.get("system.os_family")
    if family in INITRAMFS:
        facts.set("derived.pci.initramfs_command", INITRAMFS[family])
    else:
        facts.mark_unknown("derived.pci.initramfs_command", f"no known initramfs tool for {facts.get('system.os')}")


def _flavour(facts: Facts) -> None:
    out = "derived.kernel.flavour_problems"
    flavour = facts.get("kernel.nvidia_module_flavour")
    if flavour not in ("open", "proprietary"):
        facts.mark_unknown(out, facts.reason("kernel.nvidia_module_flavour") or "the module's flavour is not known")
        return
    problems = []
    for i in facts.indices("gpu"):
        cc = major_minor(facts.get(indexed("gpu", i, "compute_capability")))
        name = facts.get(indexed("gpu", i, "name")) or f"GPU {i}"
        if cc is None:
            continue
        if flavour == "open" and cc < (7, 5):
            problems.append(f"{name} (compute capability {cc[0]}.{cc[1]}) needs the proprietary modules")
        elif flavour == "proprietary" and cc >= (10, 0):
            problems.append(f"{name} (compute capability {cc[0]}.{cc[1]}, Blackwell or later) needs the open modules")
    facts.set(out, problems)
