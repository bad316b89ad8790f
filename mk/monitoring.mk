# make test-monitoring: deploy/monitoring/ (Grafana dashboard, Prometheus
# scrape config and alert rules) against a coordinator and six agents on
# loopback, scraped by Debian's prometheus (tests/monitoring/monitoring.sh,
# about 30 s: it waits for two of Prometheus's 15 s scrapes). Grafana is not
# packaged for Debian: every panel's query is run through Prometheus's HTTP
# API instead (tests/docker/prometheus.sh). `make deps-monitoring` installs
# prometheus only; make test does not need it (tests/e2e/dashboard.sh runs
# promtool only when it is there).
PROM_PKGS := prometheus

.PHONY: deps-monitoring test-monitoring

deps-monitoring:
	@./mk/deps.sh $(PROM_PKGS)

test-monitoring: all deps-monitoring
	$(Q)env -u MAKEFLAGS -u MFLAGS SFL_BIN=$(BUILD) tests/run.sh e2e $(BUILD) \
	    tests/monitoring/monitoring.sh
