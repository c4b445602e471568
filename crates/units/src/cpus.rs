//! CPU lists in the kernel's cpulist format: `0,1`, `2-5,7`.

/// The highest CPU number a list may name, plus one: the size of the kernel
/// affinity mask that `sched_setaffinity` is given (glibc's `CPU_SETSIZE`).
pub const MAX_CPUS: usize = 1024;

/// Parses a CPU list such as `0,1` or `2-5,7` (the kernel's cpulist format),
/// in the order given. Every CPU must be below [`MAX_CPUS`], so the list is
/// bounded whatever the input.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let cpu = |p: &str| p.trim().parse::<usize>().ok().filter(|&c| c < MAX_CPUS);
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cpu(a)?, cpu(b)?);
                if a > b {
                    return None;
                }
                v.extend(a..=b);
            }
            None => v.push(cpu(part)?),
        }
        if v.len() > MAX_CPUS {
            return None;
        }
    }
    (!v.is_empty()).then_some(v)
}

/// `0-3,8` from a sorted list: the form [`parse_cpu_list`] reads back.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", cpus[i], cpus[j]) } else { cpus[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-4"), Some(vec![0, 2, 3, 4]));
        assert_eq!(parse_cpu_list(" 1 , 0 "), Some(vec![1, 0]));
        assert_eq!(parse_cpu_list("0-1023").map(|v| v.len()), Some(1024));
        for bad in ["3-1", "", ",", "a", "1-", "-1", "0-1024", "1024", "0-100000000000", "0-1023,5"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad}");
        }
    }

    #[test]
    fn formatted_lists_read_back() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(parse_cpu_list(&format_cpu_list(&[0, 2, 3, 4, 9])), Some(vec![0, 2, 3, 4, 9]));
    }
}
