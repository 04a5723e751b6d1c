# kgrag — make install | demo | test | lint | bench
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DOCS := $(addprefix tests/data/docs/,report.pdf slides.pptx sheet.xlsx)
DEMO_GRAPH ?= graphs/demo

.PHONY: install demo test lint bench eval clean neo4j-build neo4j neo4j-stop

install: $(VENV)/.installed

# torch is pinned to the CPU wheel first: an unpinned resolve pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	@# the MCP SDK's 1.x line beside the 2.x installed, for the tests of both
	$(BIN)/python tests/make_mcp1_env.py $(VENV)/mcp1
	touch $@

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/kgrag ingest examples/corpus.json --graph $(DEMO_GRAPH)
	HF_HUB_OFFLINE=1 $(BIN)/kgrag query --graph $(DEMO_GRAPH) -k 3 --unit chunk,community,tree-node \
		"What country was the author of Brand a citizen of?" \
		"In what county is the city where Harris W. Fawell was born?" \
		"What is the name of the waterfall in the country where the Bubye River is found?"
	HF_HUB_OFFLINE=1 $(BIN)/kgrag query --graph $(DEMO_GRAPH) --op local -k 3 --unit chunk,path \
		"In what county is the city where Harris W. Fawell was born?"
	# documents: a PDF report, slides and a spreadsheet (made by LibreOffice; see their README)
	HF_HUB_OFFLINE=1 $(BIN)/kgrag ingest $(DEMO_DOCS) --graph $(DEMO_GRAPH)-docs
	HF_HUB_OFFLINE=1 $(BIN)/kgrag query --graph $(DEMO_GRAPH)-docs -k 3 --unit chunk \
		"Which station is in Shetland, and when was it first lit?"

# the suite in TEST_WORKERS processes (pytest-xdist; 0 runs it in this one), a test file
# to a process: a module's fixtures are made once, and its tests run in order
TEST_WORKERS ?= 2
test: install neo4j-build
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# Neo4j 5 Community (from Maven Central) inside the project's launcher, neo4j/; JDK 17
NEO4J_BUILT := neo4j/target/classes/kgrag/neo4j/Launcher.class
neo4j-build: $(NEO4J_BUILT)

$(NEO4J_BUILT): neo4j/pom.xml $(wildcard neo4j/src/main/java/kgrag/neo4j/*.java)
	@mkdir -p neo4j/target
	@# Maven's own output (and the colour resets it writes on exit even with -B) goes to
	@# a log, shown only when the build fails, so `make -s neo4j`'s last line is the URI
	@mvn -q -B -Dstyle.color=never -f neo4j/pom.xml package > neo4j/target/build.log 2>&1 \
		|| { cat neo4j/target/build.log >&2; exit 1; }
	@touch $@

# a server in the background (data in neo4j/data/, git-ignored); its Bolt URI last
neo4j: install neo4j-build
	@$(BIN)/python neo4j/launcher.py start

neo4j-stop: install
	@$(BIN)/python neo4j/launcher.py stop

lint: install
	$(BIN)/ruff check kgrag ingest tests benchmarks
	$(BIN)/ruff format --check kgrag ingest tests benchmarks
	$(BIN)/mypy kgrag ingest

bench: install
	HF_HUB_OFFLINE=1 $(BIN)/kgrag bench --corpus ../shared/bench/2wikimultihopqa/2wiki_corpus.json \
		--graph graphs/2wiki --questions benchmarks/data/2wiki_heldout.json --out bench-report

BENCH ?= ../shared/bench
eval: install
	for set in musique/musique100 hotpotqa/hotpotqa100; do \
		name=$$(basename $$set); \
		HF_HUB_OFFLINE=1 $(BIN)/kgrag eval --graph graphs/$$name --corpus $(BENCH)/$${set}_corpus.json \
			--questions $(BENCH)/$$set.json --modes dense,sparse,hybrid; \
	done

clean:
	rm -rf $(VENV) $(DEMO_GRAPH) $(DEMO_GRAPH)-docs
