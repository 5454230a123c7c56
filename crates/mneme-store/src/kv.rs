//! Key-value with Redis semantics over Redis (`spin:redis@3.0.0`) or Spin
//! key-value (`spin:key-value@3.0.0`).
//!
//! The message-flow design keeps working memory, gists and other short-lived
//! state in Redis lists, sorted sets and keys with TTLs. On Redis these are
//! the real commands; on Spin key-value they are emulated with the envelope
//! in [`crate::kvcodec`]. Every key is prefixed with the store namespace
//! (variable `store_namespace`) so test runs and tenants never collide.

use spin_sdk::{key_value, redis};

use crate::StoreError;
use crate::kvcodec::{self, Entry};

/// Which backend a [`Kv`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvKind {
    KeyValue,
    Redis,
}

impl KvKind {
    pub fn as_str(self) -> &'static str {
        match self {
            KvKind::KeyValue => "key-value",
            KvKind::Redis => "redis",
        }
    }
}

enum Backend {
    KeyValue(key_value::Store),
    Redis(redis::Connection),
}

/// An open key-value store.
pub struct Kv {
    backend: Backend,
    prefix: String,
}

impl Kv {
    pub async fn open_key_value(label: &str, namespace: &str) -> Result<Self, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "opening the key-value store", async {
            let store = key_value::Store::open(label).await.map_err(kv_error)?;
            Ok(Self { backend: Backend::KeyValue(store), prefix: format!("{namespace}:") })
        })
        .await
    }

    pub async fn open_redis(url: &str, namespace: &str) -> Result<Self, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "opening the key-value store", async {
            let conn = redis::Connection::open(url).await.map_err(redis_error)?;
            Ok(Self { backend: Backend::Redis(conn), prefix: format!("{namespace}:") })
        })
        .await
    }

    pub fn kind(&self) -> KvKind {
        match self.backend {
            Backend::KeyValue(_) => KvKind::KeyValue,
            Backend::Redis(_) => KvKind::Redis,
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    async fn redis(&self, cmd: &str, args: Vec<redis::RedisParameter>) -> Result<Vec<redis::RedisResult>, StoreError> {
        let Backend::Redis(c) = &self.backend else { unreachable!("redis command on key-value backend") };
        c.execute(cmd, args).await.map_err(redis_error)
    }

    async fn load(&self, key: &str) -> Result<Option<(Entry, u64)>, StoreError> {
        let Backend::KeyValue(s) = &self.backend else { unreachable!("envelope on redis backend") };
        match s.get(key).await.map_err(kv_error)? {
            None => Ok(None),
            Some(bytes) => kvcodec::decode(&bytes, mneme_time::clock::system_ms())
                .map_err(|e| StoreError::new("decode", format!("key `{key}`: {e}"))),
        }
    }

    async fn save(&self, key: &str, entry: &Entry, expires: u64) -> Result<(), StoreError> {
        let Backend::KeyValue(s) = &self.backend else { unreachable!("envelope on redis backend") };
        s.set(key, kvcodec::encode(entry, expires)).await.map_err(kv_error)
    }

    /// The string stored at `key`, if any and not expired.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(c) => c.get(&key).await.map_err(redis_error),
                Backend::KeyValue(_) => match self.load(&key).await? {
                    Some((Entry::String(b), _)) => Ok(Some(b)),
                    Some(_) => Err(wrong_type(&key)),
                    None => Ok(None),
                },
            }
        })
        .await
    }

    /// Stores a string, replacing any value, with an optional TTL.
    pub async fn set(&self, key: &str, value: &[u8], ttl_ms: Option<u64>) -> Result<(), StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => {
                    let mut args = vec![bin(&key), bin(value)];
                    if let Some(ttl) = ttl_ms {
                        args.extend([bin("PX"), redis::RedisParameter::Int64(ttl.max(1) as i64)]);
                    }
                    self.redis("SET", args).await.map(drop)
                }
                Backend::KeyValue(_) => {
                    let expires = ttl_ms.map_or(0, |t| mneme_time::clock::system_ms() + t.max(1));
                    self.save(&key, &Entry::String(value.to_vec()), expires).await
                }
            }
        })
        .await
    }

    /// Deletes `key`; deleting a missing key is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(c) => c.del(&[key]).await.map(drop).map_err(redis_error),
                Backend::KeyValue(s) => s.delete(&key).await.map_err(kv_error),
            }
        })
        .await
    }

    /// Increments the integer at `key` (missing counts as 0); keeps its TTL.
    pub async fn incr(&self, key: &str) -> Result<i64, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(c) => c.incr(&key).await.map_err(redis_error),
                Backend::KeyValue(_) => {
                    let (n, expires) = match self.load(&key).await? {
                        None => (0, 0),
                        Some((Entry::String(b), exp)) => (
                            std::str::from_utf8(&b).ok().and_then(|s| s.parse::<i64>().ok()).ok_or_else(|| {
                                StoreError::new("decode", format!("key `{key}` does not hold an integer"))
                            })?,
                            exp,
                        ),
                        Some(_) => return Err(wrong_type(&key)),
                    };
                    let n = n + 1;
                    self.save(&key, &Entry::String(n.to_string().into_bytes()), expires).await?;
                    Ok(n)
                }
            }
        })
        .await
    }

    /// Sets a TTL on an existing key; returns whether the key existed.
    pub async fn expire(&self, key: &str, ttl_ms: u64) -> Result<bool, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => {
                    let r = self
                        .redis("PEXPIRE", vec![bin(&key), redis::RedisParameter::Int64(ttl_ms.max(1) as i64)])
                        .await?;
                    Ok(matches!(r.first(), Some(redis::RedisResult::Int64(1))))
                }
                Backend::KeyValue(_) => match self.load(&key).await? {
                    None => Ok(false),
                    Some((e, _)) => {
                        self.save(&key, &e, mneme_time::clock::system_ms() + ttl_ms.max(1)).await.map(|_| true)
                    }
                },
            }
        })
        .await
    }

    /// Appends items to the list at `key`; returns the new length.
    pub async fn rpush(&self, key: &str, items: &[&[u8]]) -> Result<u64, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => {
                    let mut args = vec![bin(&key)];
                    args.extend(items.iter().map(bin));
                    let r = self.redis("RPUSH", args).await?;
                    Ok(int(&r) as u64)
                }
                Backend::KeyValue(_) => {
                    let (mut list, exp) = match self.load(&key).await? {
                        None => (Vec::new(), 0),
                        Some((Entry::List(l), exp)) => (l, exp),
                        Some(_) => return Err(wrong_type(&key)),
                    };
                    list.extend(items.iter().map(|i| i.to_vec()));
                    let len = list.len() as u64;
                    self.save(&key, &Entry::List(list), exp).await?;
                    Ok(len)
                }
            }
        })
        .await
    }

    /// Items `start..=stop` of the list at `key` (negative indexes count from the end).
    pub async fn lrange(&self, key: &str, start: i64, stop: i64) -> Result<Vec<Vec<u8>>, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => {
                    let r = self
                        .redis(
                            "LRANGE",
                            vec![bin(&key), redis::RedisParameter::Int64(start), redis::RedisParameter::Int64(stop)],
                        )
                        .await?;
                    Ok(r.into_iter().filter_map(binary).collect())
                }
                Backend::KeyValue(_) => match self.load(&key).await? {
                    None => Ok(Vec::new()),
                    Some((Entry::List(l), _)) => {
                        Ok(kvcodec::redis_range(l.len(), start, stop).map_or_else(Vec::new, |(s, e)| l[s..=e].to_vec()))
                    }
                    Some(_) => Err(wrong_type(&key)),
                },
            }
        })
        .await
    }

    /// Keeps only items `start..=stop` of the list at `key`.
    pub async fn ltrim(&self, key: &str, start: i64, stop: i64) -> Result<(), StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => self
                    .redis(
                        "LTRIM",
                        vec![bin(&key), redis::RedisParameter::Int64(start), redis::RedisParameter::Int64(stop)],
                    )
                    .await
                    .map(drop),
                Backend::KeyValue(s) => match self.load(&key).await? {
                    None => Ok(()),
                    Some((Entry::List(l), exp)) => match kvcodec::redis_range(l.len(), start, stop) {
                        Some((a, b)) => self.save(&key, &Entry::List(l[a..=b].to_vec()), exp).await,
                        None => s.delete(&key).await.map_err(kv_error),
                    },
                    Some(_) => Err(wrong_type(&key)),
                },
            }
        })
        .await
    }

    /// Every live key that starts with `prefix`, without the namespace. For
    /// bulk deletion (forgetting, deleting everything); a single principal's
    /// key count keeps the scan cheap.
    pub async fn keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let full = self.key(prefix);
            let raw: Vec<String> = match &self.backend {
                Backend::Redis(_) => {
                    let pattern: String = full
                        .chars()
                        .flat_map(|c| if matches!(c, '*' | '?' | '[' | ']' | '\\') { vec!['\\', c] } else { vec![c] })
                        .chain(std::iter::once('*'))
                        .collect();
                    let r = self.redis("KEYS", vec![bin(&pattern)]).await?;
                    r.into_iter().filter_map(binary).map(|b| String::from_utf8_lossy(&b).into_owned()).collect()
                }
                Backend::KeyValue(s) => {
                    let all = s.get_keys().await.collect().await.map_err(kv_error)?;
                    let mut live = Vec::new();
                    for k in all.into_iter().filter(|k| k.starts_with(&full)) {
                        if self.load(&k).await?.is_some() {
                            live.push(k);
                        }
                    }
                    live
                }
            };
            Ok(raw.into_iter().filter_map(|k| k.strip_prefix(&self.prefix).map(str::to_string)).collect())
        })
        .await
    }

    /// Adds or rescores `member` in the sorted set at `key`; true when new.
    pub async fn zadd(&self, key: &str, score: f64, member: &str) -> Result<bool, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => {
                    let r = self.redis("ZADD", vec![bin(&key), bin(score.to_string()), bin(member)]).await?;
                    Ok(int(&r) == 1)
                }
                Backend::KeyValue(_) => {
                    let (mut set, exp) = match self.load(&key).await? {
                        None => (Vec::new(), 0),
                        Some((Entry::ZSet(z), exp)) => (z, exp),
                        Some(_) => return Err(wrong_type(&key)),
                    };
                    let added = kvcodec::zadd(&mut set, score, member);
                    self.save(&key, &Entry::ZSet(set), exp).await?;
                    Ok(added)
                }
            }
        })
        .await
    }

    /// Members with `min <= score <= max`, lowest first, with their scores.
    pub async fn zrange_by_score(&self, key: &str, min: f64, max: f64) -> Result<Vec<(String, f64)>, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => {
                    let r = self
                        .redis(
                            "ZRANGEBYSCORE",
                            vec![bin(&key), bin(min.to_string()), bin(max.to_string()), bin("WITHSCORES")],
                        )
                        .await?;
                    let flat: Vec<String> =
                        r.into_iter().filter_map(binary).map(|b| String::from_utf8_lossy(&b).into_owned()).collect();
                    Ok(flat.chunks(2).filter_map(|c| Some((c[0].clone(), c.get(1)?.parse().ok()?))).collect())
                }
                Backend::KeyValue(_) => match self.load(&key).await? {
                    None => Ok(Vec::new()),
                    Some((Entry::ZSet(z), _)) => {
                        Ok(z.into_iter().filter(|(s, _)| *s >= min && *s <= max).map(|(s, m)| (m, s)).collect())
                    }
                    Some(_) => Err(wrong_type(&key)),
                },
            }
        })
        .await
    }

    /// Removes `member` from the sorted set at `key`; true when it was there.
    pub async fn zrem(&self, key: &str, member: &str) -> Result<bool, StoreError> {
        crate::sql::within(crate::sql::DEADLINE, "the key-value store", async {
            let key = self.key(key);
            match &self.backend {
                Backend::Redis(_) => Ok(int(&self.redis("ZREM", vec![bin(&key), bin(member)]).await?) == 1),
                Backend::KeyValue(_) => match self.load(&key).await? {
                    None => Ok(false),
                    Some((Entry::ZSet(mut z), exp)) => {
                        let before = z.len();
                        z.retain(|(_, m)| m != member);
                        let removed = z.len() != before;
                        self.save(&key, &Entry::ZSet(z), exp).await?;
                        Ok(removed)
                    }
                    Some(_) => Err(wrong_type(&key)),
                },
            }
        })
        .await
    }
}

fn bin(s: impl AsRef<[u8]>) -> redis::RedisParameter {
    redis::RedisParameter::Binary(s.as_ref().to_vec())
}

fn int(r: &[redis::RedisResult]) -> i64 {
    match r.first() {
        Some(redis::RedisResult::Int64(n)) => *n,
        _ => 0,
    }
}

fn binary(r: redis::RedisResult) -> Option<Vec<u8>> {
    match r {
        redis::RedisResult::Binary(b) => Some(b),
        redis::RedisResult::Status(s) => Some(s.into_bytes()),
        redis::RedisResult::Int64(n) => Some(n.to_string().into_bytes()),
        redis::RedisResult::Nil => None,
    }
}

fn wrong_type(key: &str) -> StoreError {
    StoreError::new("decode", format!("key `{key}` holds a different kind of value"))
}

fn kv_error(e: key_value::Error) -> StoreError {
    use key_value::Error as E;
    match e {
        E::NoSuchStore => StoreError::new("config", "no such key-value store label"),
        E::AccessDenied => StoreError::new("access-denied", "this component may not open that key-value store"),
        E::StoreTableFull => StoreError::new("store-unavailable", "too many key-value stores open"),
        E::Other(m) => StoreError::new("store-unavailable", m),
    }
}

fn redis_error(e: redis::Error) -> StoreError {
    use redis::Error as E;
    match e {
        E::InvalidAddress => StoreError::new("access-denied", "Redis address invalid or not in allowed_outbound_hosts"),
        E::TooManyConnections => StoreError::new("store-unavailable", "too many Redis connections"),
        E::TypeError => StoreError::new("decode", "Redis returned an unexpected type"),
        E::Other(m) => StoreError::new("store-unavailable", format!("Redis: {m}")),
    }
}
