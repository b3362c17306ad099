# The two commands of the quick start are `make dev` and `make test`; the rest serve them.
SHELL := /bin/bash
NODE_RUN := node --import tsx

# Every recipe runs on the Node.js release of .node-version: when the machine's Node is of an older major,
# scripts/node-env.sh installs that release from the npm registry into .node/ and names its directory.
NODE_BIN := $(shell scripts/node-env.sh || echo FAILED)
ifeq ($(NODE_BIN),FAILED)
$(error scripts/node-env.sh could not provide Node.js $(shell cat .node-version) (its message is above))
endif
ifneq ($(NODE_BIN),)
export PATH := $(NODE_BIN):$(PATH)
export npm_config_nodedir := $(abspath $(NODE_BIN)/..)
endif

.PHONY: cli-package bench-console bench-jobs-list node nats-auth openapi-lint plugin plugin-schemas settings-doc bootstrap-operator dev test test-unit test-integration migrate lint format typecheck api-check api-update api-release check helm-check bench chaos fuzz build image clean

## Prints the Node.js the other targets run on (installing the pinned release first when needed).
node:
	@echo "$$(command -v node) $$(node --version)"

node_modules/.install-stamp: package.json package-lock.json .node-version
	npm ci
	@touch $@

## Installs dependencies, starts NATS/PostgreSQL when needed, migrates, seeds, runs all six services.
dev: node_modules/.install-stamp
	SECURE="$(SECURE)" $(NODE_RUN) scripts/dev.ts

## Runs every test (unit and integration against real NATS and PostgreSQL).
test: node_modules/.install-stamp
	npx vitest run $(VITEST_ARGS)

test-unit: node_modules/.install-stamp
	npx vitest run --project unit

test-integration: node_modules/.install-stamp
	npx vitest run --project integration

## Applies every service's pending migrations to DATABASE_URL (creating the database if needed).
migrate: node_modules/.install-stamp
	$(NODE_RUN) scripts/migrate.ts

## One-time creation of the first platform operator: make bootstrap-operator USERNAME=alice
bootstrap-operator: node_modules/.install-stamp
	$(NODE_RUN) scripts/bootstrap-operator.ts --username "$(USERNAME)"

lint: node_modules/.install-stamp
	npx eslint . && npx prettier --check . && $(NODE_RUN) scripts/layering.ts

format: node_modules/.install-stamp
	npx prettier --write . && npx eslint --fix .

typecheck: node_modules/.install-stamp
	npx tsc -p tsconfig.json --noEmit
	npx tsc -p services/gateway/admin --noEmit

## The public interface of the plugin SDK and the wire contract against docs/api/unshipped/ (docs/releasing.md).
api-check: node_modules/.install-stamp
	$(NODE_RUN) scripts/api-check.ts

## After an intended change of that interface: rewrites docs/api/unshipped/ and docs/sdk/ (commit them).
api-update: node_modules/.install-stamp
	$(NODE_RUN) scripts/api-check.ts --update

## The release step: docs/api/unshipped/ becomes docs/api/shipped/.
api-release: node_modules/.install-stamp
	$(NODE_RUN) scripts/api-check.ts --release

## The OpenAPI description against Redocly's recommended rules and Spectral's spectral:oas: 0 errors, 0 warnings.
openapi-lint: node_modules/.install-stamp
	$(NODE_RUN) scripts/openapi-lint.ts

check: lint typecheck api-check openapi-lint test

## Prints throughput and latency of the public route next to bare Fastify and moleculer-web.
bench: node_modules/.install-stamp
	$(NODE_RUN) bench/src/main.ts $(BENCH_ARGS)

## GET /api/jobs with each filter over 1,000,000 jobs: p50/p95 per filter.
bench-jobs-list: node_modules/.install-stamp
	$(NODE_RUN) bench/src/jobs-list.ts $(BENCH_ARGS)

## The admin console's list pages through the stack on 1,000,000 jobs and delivery attempts; its first load.
bench-console: node_modules/.install-stamp
	$(NODE_RUN) bench/src/console-lists.ts $(BENCH_ARGS)

## Kills each service, NATS and the database connections under webhook load; fails on lost or duplicated work.
chaos: node_modules/.install-stamp
	$(NODE_RUN) test/chaos/$(if $(findstring --cluster,$(CHAOS_ARGS)),cluster,main).ts $(CHAOS_ARGS)

## Requests generated from the OpenAPI description, valid and mutated, for every kind of caller (bounded).
fuzz: node_modules/.install-stamp
	$(NODE_RUN) scripts/fuzz.ts $(FUZZ_ARGS)

## The plugin author's CLI: make plugin ARGS="sign --plugin <dir> --key <key.pem>" (also verify, pack).
plugin: node_modules/.install-stamp
	$(NODE_RUN) shared/plugin-package/src/main.ts $(ARGS)

## Writes the JSON Schemas of registry.json, theme.json and plugin.signature.json to docs/schemas/.
plugin-schemas: node_modules/.install-stamp
	$(NODE_RUN) scripts/plugin-schemas.ts

## Writes the NATS authorization (one nkey user per service, least privilege) and the seeds: OUT=nats-auth.
nats-auth: node_modules/.install-stamp
	$(NODE_RUN) scripts/nats-auth.ts --out "$(or $(OUT),nats-auth)" --model "$(or $(MODEL),static)"

## Writes the settings tables of the README and the operator guide from the settings declarations.
settings-doc: node_modules/.install-stamp
	$(NODE_RUN) scripts/settings-doc.ts

## The plugin author's CLI as the npm package svc-plugin (one self-contained file) in dist/svc-plugin/.
cli-package: node_modules/.install-stamp
	node scripts/build-cli.mjs --outdir dist/svc-plugin

## Bundles each service into dist/ for the container image, with the version, commit and build time fixed in.
build: node_modules/.install-stamp
	npx tsc -p services/gateway/admin --noEmit
	node scripts/build.mjs

VERSION := $(shell node -p "require('./package.json').version")
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
## The container image (needs a Docker engine): svc:<version>, labelled with the version and the commit.
image:
	docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t svc:$(VERSION) .

helm-check: node_modules/.install-stamp
	node --import tsx scripts/helm.ts lint deploy/helm/svc --strict
	node --import tsx scripts/helm.ts lint deploy/helm/svc --strict -f deploy/helm/svc/ci/production-values.yaml
	node --import tsx scripts/helm.ts template svc deploy/helm/svc > /dev/null
	node --import tsx scripts/helm.ts template svc deploy/helm/svc -f deploy/helm/svc/ci/production-values.yaml > /dev/null

clean:
	rm -rf dist .dev .api-build node_modules/.install-stamp
