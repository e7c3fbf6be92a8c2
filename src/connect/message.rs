//! `sendmsg` and `sendmmsg` as the supervisor reads them from a confined
//! thread's memory: message headers, the iovec arrays they point at, and
//! control messages, in the thread's own layout (64-bit, or the kernel's
//! compat layout with 32-bit pointers and lengths that i386, arm and x32
//! programs use), checked the way the kernel checks them, and control
//! messages laid out again natively for the supervisor's own `sendmsg`.
//!
//! Pure parsing of bytes already read: no memory of the thread is touched
//! here, so everything judged and sent was read once.

/// The most control bytes taken from one message: the kernel copies them
/// into socket memory limited by `net.core.optmem_max` (20 KiB, 128 KiB
/// from Linux 6.9) and answers `ENOBUFS` past it.
pub(crate) const MAX_CONTROL: u64 = 64 << 10;

/// `UIO_MAXIOV`: the most iovecs in one message, and the most messages
/// one `sendmmsg` sends.
pub(crate) const MAX_IOV: u64 = 1024;

/// The width of pointers and lengths in the thread's structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    word: usize,
}

impl Layout {
    /// The compat layout (32-bit words) or the 64-bit one.
    pub(crate) fn new(compat: bool) -> Layout {
        Layout {
            word: if compat { 4 } else { 8 },
        }
    }

    fn word_at(self, bytes: &[u8], at: usize) -> u64 {
        let mut b = [0u8; 8];
        let field = &bytes[at..at + self.word];
        if cfg!(target_endian = "little") {
            b[..self.word].copy_from_slice(field);
            u64::from_le_bytes(b)
        } else {
            b[8 - self.word..].copy_from_slice(field);
            u64::from_be_bytes(b)
        }
    }

    /// A length field as the kernel reads it, signed: `size_t` read as
    /// `ssize_t`, or `compat_ssize_t`.
    fn signed(self, value: u64) -> i64 {
        if self.word == 4 {
            i64::from(value as u32 as i32)
        } else {
            value as i64
        }
    }

    /// `sizeof(struct msghdr)`: seven fields of a word (`msg_namelen` and
    /// `msg_flags`, ints, are padded to one).
    pub(crate) fn msghdr_len(self) -> usize {
        7 * self.word
    }

    /// `sizeof(struct mmsghdr)`: a `msghdr` then `unsigned int msg_len`,
    /// padded to a word.
    pub(crate) fn mmsghdr_len(self) -> usize {
        8 * self.word
    }

    /// Where `msg_len` lies in a `struct mmsghdr`.
    pub(crate) fn msg_len_at(self) -> usize {
        self.msghdr_len()
    }

    fn iovec_len(self) -> usize {
        2 * self.word
    }

    /// `sizeof(struct cmsghdr)`: `cmsg_len` (a word), level and type.
    fn cmsghdr_len(self) -> usize {
        self.word + 8
    }

    fn align(self, n: usize) -> usize {
        n.div_ceil(self.word) * self.word
    }
}

/// One `struct msghdr`, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// `msg_name`, and its length as the kernel takes it: 0 when the
    /// pointer is NULL, at most a `sockaddr_storage`.
    pub(crate) name: u64,
    pub(crate) namelen: usize,
    pub(crate) iov: u64,
    pub(crate) iovlen: u64,
    pub(crate) control: u64,
    pub(crate) controllen: u64,
}

impl Header {
    /// Parses `bytes` (at least [`Layout::msghdr_len`] of them) with the
    /// kernel's checks: a negative `msg_namelen` is `EINVAL`, a longer one
    /// is cut to a `sockaddr_storage`, more than `UIO_MAXIOV` iovecs is
    /// `EMSGSIZE`, more control bytes than [`MAX_CONTROL`] is `ENOBUFS`.
    pub(crate) fn parse(layout: Layout, bytes: &[u8]) -> Result<Header, i32> {
        if bytes.len() < layout.msghdr_len() {
            return Err(libc::EFAULT);
        }
        let w = layout.word;
        let name = layout.word_at(bytes, 0);
        let namelen = i32::from_ne_bytes([bytes[w], bytes[w + 1], bytes[w + 2], bytes[w + 3]]);
        let namelen = match (name, namelen) {
            (0, _) => 0,
            (_, n) if n < 0 => return Err(libc::EINVAL),
            (_, n) => (n as usize).min(size_of::<libc::sockaddr_storage>()),
        };
        let iovlen = layout.word_at(bytes, 3 * w);
        if iovlen > MAX_IOV {
            return Err(libc::EMSGSIZE);
        }
        let controllen = layout.word_at(bytes, 5 * w);
        if controllen > MAX_CONTROL {
            return Err(libc::ENOBUFS);
        }
        Ok(Header {
            name,
            namelen,
            iov: layout.word_at(bytes, 2 * w),
            iovlen,
            control: layout.word_at(bytes, 4 * w),
            controllen,
        })
    }

    /// How many bytes the iovec array takes.
    pub(crate) fn iov_bytes(&self, layout: Layout) -> usize {
        self.iovlen as usize * layout.iovec_len()
    }
}

/// The `(base, len)` of each iovec in `bytes`; a negative length is
/// `EINVAL`, as the kernel answers.
pub(crate) fn iovecs(layout: Layout, bytes: &[u8]) -> Result<Vec<(u64, u64)>, i32> {
    bytes
        .chunks_exact(layout.iovec_len())
        .map(|v| {
            let len = layout.word_at(v, layout.word);
            if layout.signed(len) < 0 {
                return Err(libc::EINVAL);
            }
            Ok((layout.word_at(v, 0), len))
        })
        .collect()
}

/// One control message: its level, type and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cmsg {
    pub(crate) level: i32,
    pub(crate) kind: i32,
    pub(crate) data: Vec<u8>,
}

/// The control messages in `bytes` (`msg_controllen` of them), walked as
/// the kernel walks them: a header that does not fit ends the walk, a
/// length shorter than a header or past the end is `EINVAL`.
pub(crate) fn control(layout: Layout, bytes: &[u8]) -> Result<Vec<Cmsg>, i32> {
    let header = layout.cmsghdr_len();
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + header <= bytes.len() {
        let len = layout.word_at(bytes, at);
        let int_at = |i: usize| {
            let b = &bytes[i..i + 4];
            i32::from_ne_bytes([b[0], b[1], b[2], b[3]])
        };
        if len < header as u64 || len > (bytes.len() - at) as u64 {
            return Err(libc::EINVAL);
        }
        let len = len as usize;
        out.push(Cmsg {
            level: int_at(at + layout.word),
            kind: int_at(at + layout.word + 4),
            data: bytes[at + header..at + len].to_vec(),
        });
        at += layout.align(len);
    }
    Ok(out)
}

/// Control messages laid out for this process's own `sendmsg`: native
/// `cmsghdr`s, each padded to a `size_t`.
pub(crate) fn native_control(cmsgs: &[Cmsg]) -> Vec<u8> {
    let native = Layout::new(size_of::<usize>() == 4);
    let mut out = Vec::new();
    for c in cmsgs {
        let len = native.cmsghdr_len() + c.data.len();
        out.extend_from_slice(&len.to_ne_bytes());
        out.extend_from_slice(&c.level.to_ne_bytes());
        out.extend_from_slice(&c.kind.to_ne_bytes());
        out.extend_from_slice(&c.data);
        out.resize(out.len() + native.align(len) - len, 0);
    }
    out
}

/// The `struct ucred` of an `SCM_CREDENTIALS` message: pid, uid, gid.
/// `EINVAL` for any other length, as the kernel answers.
pub(crate) fn credentials(data: &[u8]) -> Result<(i32, u32, u32), i32> {
    if data.len() != 12 {
        return Err(libc::EINVAL);
    }
    let word = |i: usize| [data[i], data[i + 1], data[i + 2], data[i + 3]];
    Ok((
        i32::from_ne_bytes(word(0)),
        u32::from_ne_bytes(word(4)),
        u32::from_ne_bytes(word(8)),
    ))
}

/// The descriptors of an `SCM_RIGHTS` message (a trailing partial int is
/// ignored, as by the kernel).
pub(crate) fn rights(data: &[u8]) -> Vec<i32> {
    data.chunks_exact(4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(layout: Layout, values: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in values {
            if layout.word == 4 {
                out.extend_from_slice(&(*v as u32).to_ne_bytes());
            } else {
                out.extend_from_slice(&v.to_ne_bytes());
            }
        }
        out
    }

    #[test]
    fn headers_are_read_in_both_layouts_with_the_kernel_s_checks() {
        for compat in [false, true] {
            let l = Layout::new(compat);
            // name, namelen (an int in a word), iov, iovlen, control, controllen, flags
            let h = words(l, &[0x1000, 16, 0x2000, 2, 0x3000, 24, 0]);
            assert_eq!(h.len(), l.msghdr_len());
            assert_eq!(
                Header::parse(l, &h),
                Ok(Header {
                    name: 0x1000,
                    namelen: 16,
                    iov: 0x2000,
                    iovlen: 2,
                    control: 0x3000,
                    controllen: 24
                })
            );
            // A NULL name has no length; a long one is cut; a negative one fails.
            let h = words(l, &[0, 16, 0, 0, 0, 0, 0]);
            assert_eq!(Header::parse(l, &h).map(|h| h.namelen), Ok(0));
            let h = words(l, &[1, 4096, 0, 0, 0, 0, 0]);
            assert_eq!(Header::parse(l, &h).map(|h| h.namelen), Ok(128));
            let h = words(l, &[1, u64::from(u32::MAX), 0, 0, 0, 0, 0]);
            assert_eq!(Header::parse(l, &h), Err(libc::EINVAL));
            let h = words(l, &[0, 0, 0, 1025, 0, 0, 0]);
            assert_eq!(Header::parse(l, &h), Err(libc::EMSGSIZE));
            let h = words(l, &[0, 0, 0, 0, 0, MAX_CONTROL + 1, 0]);
            assert_eq!(Header::parse(l, &h), Err(libc::ENOBUFS));
            let v = words(l, &[0x10, 3, 0x20, 4]);
            assert_eq!(iovecs(l, &v), Ok(vec![(0x10, 3), (0x20, 4)]));
            let v = words(l, &[0x10, u64::MAX]);
            assert_eq!(iovecs(l, &v), Err(libc::EINVAL));
        }
        assert_eq!(Layout::new(false).mmsghdr_len(), 64);
        assert_eq!(Layout::new(true).mmsghdr_len(), 32);
    }

    #[test]
    fn control_messages_are_walked_as_the_kernel_walks_them_and_laid_out_natively() {
        for compat in [false, true] {
            let l = Layout::new(compat);
            let mut bytes = words(l, &[l.cmsghdr_len() as u64 + 8]);
            bytes.extend_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
            bytes.extend_from_slice(&libc::SCM_RIGHTS.to_ne_bytes());
            bytes.extend_from_slice(&[3, 0, 0, 0, 4, 0, 0, 0]);
            let mut second = words(l, &[l.cmsghdr_len() as u64 + 2]);
            second.extend_from_slice(&libc::SOL_UDP.to_ne_bytes());
            second.extend_from_slice(&103i32.to_ne_bytes());
            second.extend_from_slice(&[0xdc, 0x05]);
            bytes.extend_from_slice(&second);
            bytes.resize(l.align(bytes.len()), 0);
            let cmsgs = control(l, &bytes).expect("well formed");
            assert_eq!(cmsgs.len(), 2);
            assert_eq!(rights(&cmsgs[0].data), vec![3, 4]);
            assert_eq!(cmsgs[1].data, vec![0xdc, 0x05]);
            // Native again: what the kernel reads from this process.
            let native = native_control(&cmsgs);
            let n = Layout::new(false);
            assert_eq!(control(n, &native), Ok(cmsgs));
            // A length past the end, or shorter than a header, is EINVAL.
            let mut bad = words(l, &[200]);
            bad.extend_from_slice(&[0; 8]);
            assert_eq!(control(l, &bad), Err(libc::EINVAL));
            let mut bad = words(l, &[2]);
            bad.extend_from_slice(&[0; 8]);
            assert_eq!(control(l, &bad), Err(libc::EINVAL));
            // Fewer bytes than a header: no message.
            assert_eq!(control(l, &[0; 4]), Ok(vec![]));
        }
        assert_eq!(
            credentials(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]),
            Ok((1, 2, 3))
        );
        assert_eq!(credentials(&[0; 8]), Err(libc::EINVAL));
    }
}
