# mk/hook.mk: filled in by its module.
