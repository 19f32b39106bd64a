"""The journal on PostgreSQL: a server the owner runs (or a managed one), for a kernel
that outgrows one machine. Same tables, same verbs, same contract suite as SQLite."""
