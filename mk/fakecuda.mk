# mk/fakecuda.mk: filled in by its module.
