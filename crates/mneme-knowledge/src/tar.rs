//! A POSIX ustar archive writer and reader, enough for a vault of markdown
//! files.

/// One file of the archive.
pub struct File<'a> {
    pub path: &'a str,
    pub contents: &'a [u8],
    pub mtime_secs: u64,
}

fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let s = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&s.as_bytes()[s.len() - digits..]);
    field[digits] = 0;
}

/// Splits a path into ustar's `prefix` (≤ 155 bytes) and `name` (≤ 100).
fn split_path(path: &str) -> Option<(&str, &str)> {
    if path.len() <= 100 {
        return Some(("", path));
    }
    let mut end = path.len().min(156);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    let cut = path[..end].rfind('/')?;
    let (prefix, name) = (&path[..cut], &path[cut + 1..]);
    // An empty prefix would read back without the path's leading `/`.
    (name.len() <= 100 && !name.is_empty() && !prefix.is_empty()).then_some((prefix, name))
}

/// The archive of `files`; `Err` names a path ustar cannot hold: too long,
/// or with a NUL (which ends a header field, so it would read back cut).
pub fn archive(files: &[File]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for f in files {
        if f.path.contains('\0') {
            return Err(format!("a path holds a NUL, which a tar archive cannot: {:?}", f.path));
        }
        let (prefix, name) =
            split_path(f.path).ok_or_else(|| format!("path too long for a tar archive: {}", f.path))?;
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        octal(&mut h[100..108], 0o644);
        octal(&mut h[108..116], 0);
        octal(&mut h[116..124], 0);
        octal(&mut h[124..136], f.contents.len() as u64);
        octal(&mut h[136..148], f.mtime_secs);
        h[148..156].fill(b' ');
        h[156] = b'0';
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        let s = format!("{sum:06o}\0 ");
        h[148..156].copy_from_slice(s.as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(f.contents);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    Ok(out)
}

/// A header field up to its first NUL.
fn field(h: &[u8]) -> &[u8] {
    h.iter().position(|&b| b == 0).map_or(h, |n| &h[..n])
}

fn parse_octal(h: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(field(h)).ok()?.trim();
    if s.is_empty() { Some(0) } else { u64::from_str_radix(s, 8).ok() }
}

/// The regular files of a ustar archive as `(path, contents)`, in order.
/// `Err` says what is malformed: a bad checksum or size, a truncated
/// entry, a path that is not UTF-8, or a GNU or pax extension (long names,
/// extended headers), which this reader does not take. Directories and
/// links are skipped.
pub fn entries(archive: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= archive.len() {
        let h = &archive[at..at + 512];
        if h.iter().all(|&b| b == 0) {
            return Ok(out);
        }
        let stored = parse_octal(&h[148..156]).ok_or("a header's checksum is not octal")?;
        let sum: u64 =
            h.iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u64::from(b) }).sum();
        if stored != sum {
            return Err(format!("the header at byte {at} fails its checksum"));
        }
        let size = parse_octal(&h[124..136]).ok_or("a header's size is not octal")? as usize;
        if matches!(h[156], b'L' | b'K' | b'x' | b'g') {
            return Err(format!("the entry at byte {at} is a GNU or pax extension header"));
        }
        let name = std::str::from_utf8(field(&h[..100])).map_err(|_| "a path is not UTF-8")?;
        // Only ustar keeps a path prefix there.
        let ustar = &h[257..263] == b"ustar\0";
        let prefix =
            if ustar { std::str::from_utf8(field(&h[345..500])).map_err(|_| "a path is not UTF-8")? } else { "" };
        let path = if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") };
        let start = at + 512;
        let end = start.checked_add(size).filter(|&e| e <= archive.len()).ok_or("the archive is truncated")?;
        if matches!(h[156], b'0' | 0) {
            out.push((path, archive[start..end].to_vec()));
        }
        at = start + size.div_ceil(512) * 512;
    }
    if at == archive.len() { Ok(out) } else { Err("the archive is truncated".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tar_of_two_files_is_well_formed() {
        let a = archive(&[
            File { path: "Knowledge/KE-0001.md", contents: b"hello", mtime_secs: 1 },
            File { path: "Finance/rx/rx-2026-11-22-01.md", contents: &[b'x'; 600], mtime_secs: 2 },
        ])
        .unwrap();
        assert_eq!(a.len(), 512 + 512 + 512 + 1024 + 1024);
        assert_eq!(&a[..20], b"Knowledge/KE-0001.md");
        assert_eq!(&a[257..263], b"ustar\0");
        assert_eq!(&a[124..136], b"00000000005\0");
        // The checksum is the byte sum with the checksum field as spaces.
        let mut h = a[..512].to_vec();
        h[148..156].fill(b' ');
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        assert_eq!(std::str::from_utf8(&a[148..154]).unwrap(), format!("{sum:06o}"));
        assert_eq!(&a[512..517], b"hello");
        assert!(a[a.len() - 1024..].iter().all(|&b| b == 0));
    }

    #[test]
    fn entries_read_back_what_archive_wrote() {
        let long = format!("{}/{}", "d".repeat(120), "f.md");
        let big = vec![b'y'; 1500];
        let files = [
            File { path: "Knowledge/KE-0001.md", contents: b"hello", mtime_secs: 1 },
            File { path: &long, contents: &big, mtime_secs: 2 },
            File { path: "empty.md", contents: b"", mtime_secs: 3 },
        ];
        let a = archive(&files).unwrap();
        let back = entries(&a).unwrap();
        let want: Vec<(String, Vec<u8>)> = files.iter().map(|f| (f.path.to_string(), f.contents.to_vec())).collect();
        assert_eq!(back, want);
        assert_eq!(entries(&[]).unwrap(), vec![]);
    }

    #[test]
    fn entries_refuse_a_damaged_archive() {
        let a = archive(&[File { path: "a.md", contents: &[b'x'; 700], mtime_secs: 1 }]).unwrap();
        let mut bad = a.clone();
        bad[0] = b'b';
        assert!(entries(&bad).unwrap_err().contains("checksum"));
        assert_eq!(entries(&a[..900]).unwrap_err(), "the archive is truncated");
        assert_eq!(entries(&a[..100]).unwrap_err(), "the archive is truncated");
        let mut pax = a.clone();
        pax[156] = b'x';
        let sum: u32 =
            pax[..512].iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u32::from(b) }).sum();
        pax[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        assert!(entries(&pax).unwrap_err().contains("extension header"));
    }

    #[test]
    fn a_long_path_is_cut_on_a_character_boundary() {
        // Byte 156 falls inside the `é`.
        let long = format!("{}/{}é/f.md", "a".repeat(100), "d".repeat(54));
        let a = archive(&[File { path: &long, contents: b"x", mtime_secs: 0 }]).unwrap();
        assert_eq!(entries(&a).unwrap(), vec![(long, b"x".to_vec())]);
    }

    #[test]
    fn long_paths_use_the_prefix_field() {
        let long = format!("{}/{}", "d".repeat(120), "f.md");
        let a = archive(&[File { path: &long, contents: b"", mtime_secs: 0 }]).unwrap();
        assert_eq!(&a[..4], b"f.md");
        assert_eq!(&a[345..465], "d".repeat(120).as_bytes());
        assert!(archive(&[File { path: &"x".repeat(300), contents: b"", mtime_secs: 0 }]).is_err());
    }

    /// Found by `fuzz/fuzz_targets/tar.rs`: these paths read back other
    /// than written, so the writer refuses them.
    #[test]
    fn paths_that_would_read_back_changed_are_refused() {
        let nul = archive(&[File { path: "\0\u{5}", contents: b"", mtime_secs: 0 }]).unwrap_err();
        assert!(nul.contains("NUL"), "{nul}");
        assert!(archive(&[File { path: "a\0b.md", contents: b"", mtime_secs: 0 }]).is_err());
        // 101 bytes whose only `/` leads: the prefix field would be empty
        // and the `/` lost.
        let rooted = format!("/{}", "n".repeat(100));
        assert!(archive(&[File { path: &rooted, contents: b"", mtime_secs: 0 }]).is_err());
        let short_rooted = format!("/{}", "n".repeat(99));
        let a = archive(&[File { path: &short_rooted, contents: b"x", mtime_secs: 0 }]).unwrap();
        assert_eq!(entries(&a).unwrap(), vec![(short_rooted, b"x".to_vec())]);
    }
}
