-- index.db at the last schema version: a new file is created from this, in one step.
-- Generated from the migrations (python -m tests.storage.sqlite.baseline); do not edit by hand.
CREATE TABLE processes (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            task_pattern TEXT NOT NULL DEFAULT '',
            tags TEXT NOT NULL DEFAULT '[]',
            robot TEXT NOT NULL DEFAULT 'unknown',
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            success_count INTEGER NOT NULL DEFAULT 0,
            failure_count INTEGER NOT NULL DEFAULT 0,
            last_used TEXT NOT NULL DEFAULT '',
            source_mission_id TEXT NOT NULL DEFAULT '',
            extra TEXT NOT NULL DEFAULT '{}',
            body TEXT NOT NULL DEFAULT ''
        , fts_rowid INTEGER);
CREATE TABLE fleet_groups (
            group_id TEXT PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            customer TEXT NOT NULL DEFAULT '',
            factory TEXT NOT NULL DEFAULT '',
            self_improve INTEGER CHECK (self_improve IN (0, 1)),  -- NULL: follow the global toggle
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        );
CREATE TABLE fleet_robots (
            robot_id TEXT PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            group_id TEXT REFERENCES fleet_groups(group_id) ON DELETE SET NULL,  -- NULL: ungrouped
            meta TEXT NOT NULL DEFAULT '{}',
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        );
CREATE TABLE fleet_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE vectors (
            domain TEXT NOT NULL CHECK (domain IN ('process', 'memory')),
            ref TEXT NOT NULL,
            model_id TEXT NOT NULL,
            dim INTEGER NOT NULL CHECK (dim > 0),
            vec BLOB NOT NULL CHECK (length(vec) = 4 * dim),
            PRIMARY KEY (domain, ref)
        );
CREATE TABLE memories (
            id INTEGER PRIMARY KEY,
            robot TEXT NOT NULL,
            collection TEXT NOT NULL DEFAULT 'default',
            type TEXT NOT NULL CHECK (type IN ('fact', 'perception')),
            content TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT 'observation',
            confidence REAL NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            context TEXT NOT NULL DEFAULT '{}',
            perception_type TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            session_id TEXT,
            status TEXT NOT NULL DEFAULT 'active'
                CHECK (status = 'active' OR status = 'forgotten' OR status = 'superseded'),
            superseded_by INTEGER,
            forget_reason TEXT,
            content_hash TEXT NOT NULL,
            facts_hash TEXT NOT NULL DEFAULT '',
            source_weight REAL NOT NULL DEFAULT 1.0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_accessed REAL,
            data TEXT  -- last: a large blob never has to be read to reach another column
        );
CREATE TABLE memory_tags (
            memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            source TEXT NOT NULL DEFAULT 'auto' CHECK (source = 'auto' OR source = 'user' OR source = 'import'),
            PRIMARY KEY (memory_id, tag)
        ) WITHOUT ROWID;
CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            robot TEXT NOT NULL,
            collection TEXT NOT NULL DEFAULT 'default',
            context TEXT NOT NULL DEFAULT '{}',
            started_at REAL NOT NULL,
            ended_at REAL,
            outcome_score REAL,
            summary TEXT
        );
CREATE TABLE memory_index_log (seq INTEGER PRIMARY KEY, doc INTEGER);
CREATE TABLE memory_lengths (id INTEGER PRIMARY KEY, content INTEGER NOT NULL, context INTEGER NOT NULL);
CREATE TABLE process_outcomes (
            process_id TEXT NOT NULL,
            n INTEGER NOT NULL,  -- 1, 2, ... per process, in the order recorded
            at TEXT NOT NULL,
            success INTEGER NOT NULL CHECK (success = 0 OR success = 1),
            note TEXT NOT NULL DEFAULT '',
            robot TEXT NOT NULL DEFAULT '',  -- the robot; an unscoped caller's kind; '' not known
            tenant TEXT NOT NULL DEFAULT '',  -- group:<G> or solo:<robot> for a robot token, else ''
            PRIMARY KEY (process_id, n)
        ) WITHOUT ROWID;
CREATE TABLE process_tenant_counts (
            process_id TEXT NOT NULL,
            tenant TEXT NOT NULL,
            success_count INTEGER NOT NULL DEFAULT 0,
            failure_count INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (process_id, tenant)
        ) WITHOUT ROWID;
CREATE TABLE process_index_log (seq INTEGER PRIMARY KEY, doc TEXT);
CREATE TABLE memory_public (id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE, public_id INTEGER NOT NULL UNIQUE);
CREATE VIRTUAL TABLE memories_fts USING fts5(content, context, tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE processes_fts USING fts5(id UNINDEXED, title, task_pattern, tags, body, tokenize='porter unicode61');
CREATE INDEX idx_processes_robot ON processes(robot);
CREATE INDEX idx_processes_updated ON processes(updated);
CREATE INDEX idx_fleet_robots_group ON fleet_robots(group_id);
CREATE INDEX idx_vectors_model ON vectors(domain, model_id);
CREATE INDEX idx_memories_scope ON memories(robot, collection, status);
CREATE INDEX idx_memories_hash ON memories(facts_hash, robot, collection, content_hash);
CREATE INDEX idx_memories_rank ON memories(id, collection, status, robot, confidence, updated_at, source_weight, session_id);
CREATE INDEX idx_sessions_scope ON sessions(robot, collection, started_at);
CREATE INDEX idx_memories_session ON memories(session_id) WHERE session_id IS NOT NULL;
CREATE INDEX idx_process_outcomes_at ON process_outcomes(at);
CREATE TRIGGER memories_rank_log AFTER UPDATE OF id, collection, robot, status, confidence, source_weight, context, updated_at ON memories WHEN NEW.status = 'active' OR OLD.status = 'active' OR NEW.id IS NOT OLD.id BEGIN INSERT INTO memory_index_log(doc) VALUES (NEW.id); INSERT INTO memory_index_log(doc) SELECT OLD.id WHERE OLD.id IS NOT NEW.id; END;
CREATE TRIGGER memories_rank_log_insert AFTER INSERT ON memories BEGIN INSERT INTO memory_index_log(doc) VALUES (NEW.id); DELETE FROM memory_lengths WHERE id = NEW.id; END;
CREATE TRIGGER memories_text_log AFTER UPDATE OF content, context ON memories BEGIN DELETE FROM memory_lengths WHERE id = OLD.id OR id = NEW.id; INSERT INTO memory_index_log(doc) VALUES (NEW.id); END;
CREATE TRIGGER memories_rank_log_delete AFTER DELETE ON memories WHEN OLD.status = 'active' BEGIN INSERT INTO memory_index_log(doc) VALUES (OLD.id); END;
CREATE TRIGGER processes_index_log_insert AFTER INSERT ON processes BEGIN INSERT INTO process_index_log(doc) VALUES (NEW.id); END;
CREATE TRIGGER processes_index_log_update AFTER UPDATE OF id, robot, fts_rowid, title, task_pattern, tags, body ON processes BEGIN INSERT INTO process_index_log(doc) VALUES (NEW.id); INSERT INTO process_index_log(doc) SELECT OLD.id WHERE OLD.id IS NOT NEW.id; END;
CREATE TRIGGER processes_index_log_delete AFTER DELETE ON processes BEGIN INSERT INTO process_index_log(doc) VALUES (OLD.id); END;
