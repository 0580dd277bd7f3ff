"""The engine: facts, results, the family table, rules and their judging, selection, config,
the report model and its reader, and the pipeline that ties them together."""
