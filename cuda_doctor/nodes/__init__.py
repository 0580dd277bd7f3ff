"""``cuda-doctor nodes``: one task per node of a multi-node job checks the nodes against each other
(their configurations, the network between them, an all-reduce across them) before the job runs."""
