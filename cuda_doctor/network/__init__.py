"""This node's network as NCCL and Gloo see it: interfaces, RDMA devices, GPUDirect RDMA, the
network plugin, and which NIC sits near each GPU (docs/network.md)."""
