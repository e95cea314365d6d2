# mk/deps.mk: the Debian packages the daemon, tools and tests build against.
# scripts/deps.sh installs them when run as root, otherwise prints the exact
# apt-get line and fails. The stamp keeps the check off every build.
DEPS_STAMP := $(BUILD)/.deps-ok

$(DEPS_STAMP): scripts/deps.sh
	@scripts/deps.sh
	@mkdir -p $(dir $@) && touch $@
