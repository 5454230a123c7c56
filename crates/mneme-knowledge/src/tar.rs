//! A POSIX ustar archive writer, enough for a vault of markdown files.

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
    let cut = path[..path.len().min(156)].rfind('/')?;
    let (prefix, name) = (&path[..cut], &path[cut + 1..]);
    (name.len() <= 100 && !name.is_empty()).then_some((prefix, name))
}

/// The archive of `files`; `Err` names a path too long for ustar.
pub fn archive(files: &[File]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for f in files {
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
    fn long_paths_use_the_prefix_field() {
        let long = format!("{}/{}", "d".repeat(120), "f.md");
        let a = archive(&[File { path: &long, contents: b"", mtime_secs: 0 }]).unwrap();
        assert_eq!(&a[..4], b"f.md");
        assert_eq!(&a[345..465], "d".repeat(120).as_bytes());
        assert!(archive(&[File { path: &"x".repeat(300), contents: b"", mtime_secs: 0 }]).is_err());
    }
}
