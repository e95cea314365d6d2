# mk/tests.mk: which tests `make check` runs in this tree. They come from
# tests/registry, the one list of tests (its header says why a table and
# what a row holds), read by tests/registry.awk; the other mk files only
# build the programs (TEST_BINS).
#
#   make print-tests [BUILD=build/asan SAN=asan] [PART=early|late]   the list, one per line

TEST_TREE := $(if $(SAN),$(SAN),opt)
# The conditions a row may need (needs=NAME) that hold in this build.
TEST_HAVE := $(if $(HAVE_FUZZ_CC),fuzz-cc)

# A shell command printing this tree's tests in order; it fails on a
# malformed registry or on a program the build does not make.
# PART=early or PART=late: only the rows marked `early` or only the others
# (make test runs the AddressSanitizer tree's early rows beside the
# optimized suite).
TEST_LIST = awk -v tree=$(TEST_TREE) -v build=$(BUILD) -v have='$(TEST_HAVE)' \
              -v bins='$(TEST_BINS)' -v part='$(PART)' -f tests/registry.awk tests/registry

.PHONY: print-tests
print-tests:
	@$(TEST_LIST)
