# mk/tools.mk: filled in by its module.
