"""Slurm's own hooks: the fast check as a HealthCheckProgram and as a job Prolog."""
