"""Multi-GPU checks: an NCCL all-reduce smoke and interconnect (P2P, NVLink, PCIe) facts."""
