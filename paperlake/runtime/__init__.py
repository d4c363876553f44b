"""What runs the rest safely: sandboxes (SQL, expressions), the LLM client, child processes, fail points,
and the healing of damaged stores."""
