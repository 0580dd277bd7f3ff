"""What a framework process really loads, judged against what torch was built and pinned for."""
