# mk/tests.mk: filled in by its module.
