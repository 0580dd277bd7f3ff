"""Slurm's own hooks: the fast check as a HealthCheckProgram and as a job Prolog.

``node`` reads and changes a node's state through ``sinfo``/``scontrol``; ``health`` runs the
fast check under a time budget and decides what to do about the node; ``scripts`` writes the
small programs that slurm.conf names (slurmd runs them without arguments).
"""
