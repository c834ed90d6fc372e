//! A fresh database per test, removed when the test ends.

use std::path::{Path, PathBuf};

use sea_orm::ConnectionTrait;

use crate::Backend;

/// A fresh, empty database: a SQLite file, or a database of its own on the PostgreSQL server.
/// Dropping it removes it.
pub struct TestDb {
    /// What the processes under test are given (`VAS_DATABASE__URL`).
    pub url: String,
    pub backend: Backend,
    place: Place,
}

enum Place {
    Sqlite {
        file: PathBuf,
        _dir: Option<tempfile::TempDir>,
    },
    Postgres {
        admin_url: String,
        name: String,
    },
}

impl TestDb {
    pub async fn new(backend: &Backend) -> TestDb {
        match backend {
            Backend::Sqlite => TestDb::sqlite(),
            Backend::Postgres(admin_url) => TestDb::postgres(admin_url).await,
        }
    }

    /// A SQLite file in a temporary folder.
    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut db = TestDb::sqlite_at(&dir.path().join("vas.sqlite"));
        if let Place::Sqlite { _dir, .. } = &mut db.place {
            *_dir = Some(dir);
        }
        db
    }

    /// SQLite at `file` (e.g. a dev data folder's `.vas-dev/vas.sqlite`), left in place.
    pub fn sqlite_at(file: &Path) -> TestDb {
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("create the folder");
        TestDb {
            url: format!("sqlite://{}?mode=rwc", file.display()),
            backend: Backend::Sqlite,
            place: Place::Sqlite {
                file: file.to_owned(),
                _dir: None,
            },
        }
    }

    /// A new database on the server `admin_url` reaches.
    pub async fn postgres(admin_url: &str) -> TestDb {
        let name = format!("vas_test_{}", ulid::Ulid::new().to_string().to_lowercase());
        let admin = sea_orm::Database::connect(admin_url)
            .await
            .expect("connect to TEST_DATABASE_URL");
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create test database");
        admin.close().await.ok();
        let mut url = url::Url::parse(admin_url).expect("TEST_DATABASE_URL is a URL");
        url.set_path(&format!("/{name}"));
        TestDb {
            url: url.to_string(),
            backend: Backend::Postgres(admin_url.to_owned()),
            place: Place::Postgres {
                admin_url: admin_url.to_owned(),
                name,
            },
        }
    }

    /// Connected, and migrated up to (not including) the migration whose name starts with
    /// `migration`: for a test of what that migration does to rows stored before it.
    pub async fn migrated_up_to(&self, migration: &str) -> sea_orm::DatabaseConnection {
        use sea_orm_migration::MigratorTrait;
        let db = store::connect(&self.url, 2).await.expect("connect");
        let before = migrations::Migrator::migrations()
            .iter()
            .position(|m| m.name().starts_with(migration))
            .unwrap_or_else(|| panic!("{migration} is a migration"));
        let before = u32::try_from(before).expect("a few migrations");
        migrations::Migrator::up(&db, Some(before))
            .await
            .expect("migrate");
        db
    }

    /// Everything stored, as bytes: the SQLite file with its journal, or a `pg_dump` of the data.
    pub fn raw_contents(&self) -> Vec<u8> {
        match &self.place {
            Place::Sqlite { file, .. } => {
                let name = file.file_name().expect("a file name").to_string_lossy();
                let mut bytes = Vec::new();
                for entry in std::fs::read_dir(file.parent().expect("a folder")).expect("read dir")
                {
                    let path = entry.expect("entry").path();
                    // vas.sqlite, vas.sqlite-wal, vas.sqlite-shm
                    if path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(name.as_ref()))
                    {
                        bytes.extend(std::fs::read(path).unwrap_or_default());
                    }
                }
                bytes
            }
            Place::Postgres { .. } => {
                let out = std::process::Command::new("pg_dump")
                    .arg("--data-only")
                    .arg(&self.url)
                    .output()
                    .expect("pg_dump runs");
                assert!(
                    out.status.success(),
                    "pg_dump failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                out.stdout
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Place::Postgres { admin_url, name } = &self.place else {
            return;
        };
        let (admin_url, name) = (admin_url.clone(), name.clone());
        // Drop runs outside async: a short-lived runtime on its own thread drops the database.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok(admin) = sea_orm::Database::connect(admin_url.as_str()).await {
                    let _ = admin
                        .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                    admin.close().await.ok();
                }
            });
        })
        .join();
    }
}
