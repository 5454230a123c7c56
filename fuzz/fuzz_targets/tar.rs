//! The ustar reader on any bytes, and the writer/reader round trip.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use mneme_knowledge::tar;

#[derive(Arbitrary, Debug)]
struct F {
    /// Joined with `/`, so long paths with directories come up often.
    segments: Vec<String>,
    contents: Vec<u8>,
    mtime_secs: u64,
}

fuzz_target!(|data: &[u8]| {
    // Any bytes: `Ok` or `Err`, never a panic; what it returns came from
    // the input (one 512-byte header per entry, contents inside the input).
    if let Ok(entries) = tar::entries(data) {
        let used: usize = entries.iter().map(|(_, c)| 512 + c.len()).sum();
        assert!(used <= data.len());
    }

    // Files the crate's own writer archives read back identical.
    let mut u = Unstructured::new(data);
    let Ok(files) = Vec::<F>::arbitrary(&mut u) else { return };
    let paths: Vec<String> = files.iter().map(|f| f.segments.join("/")).collect();
    let list: Vec<tar::File> = files
        .iter()
        .zip(&paths)
        .map(|(f, p)| tar::File { path: p, contents: &f.contents, mtime_secs: f.mtime_secs })
        .collect();
    if let Ok(a) = tar::archive(&list) {
        assert_eq!(a.len() % 512, 0);
        let back = tar::entries(&a).expect("the writer's archive reads back");
        let want: Vec<(String, Vec<u8>)> = list.iter().map(|f| (f.path.to_string(), f.contents.to_vec())).collect();
        assert_eq!(back, want);
    }
});
