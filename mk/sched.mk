# mk/sched.mk: filled in by its module.
