"""Page-cache folios holding each file given: how many pieces sendfile has to look up and splice.

    python3 bench/folios.py FILE …        (root: reads /proc/self/pagemap and /proc/kpageflags)

Maps each file, touches every page (so all are cached), and counts folios by the kernel's page
flags: a large folio is a head page and its tails, any other page is a folio of its own. ext4
sizes a folio by the write that filled it, so a 1 MiB file written in one call is one folio,
and one written in 256 KiB pieces at odd offsets is 40-odd. Prints "unknown" where the
kernel's files cannot be read (not root, or no such files).
"""
import mmap
import os
import struct
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")
TAIL = 1 << 16  # KPF_COMPOUND_TAIL: a page inside a large folio, after its head


def folios(path):
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            return 0
        mapping = mmap.mmap(file.fileno(), size, prot=mmap.PROT_READ)
        try:
            for offset in range(0, size, PAGE):
                mapping[offset]  # fault every page in
            base = None
            real = os.path.realpath(path)
            with open("/proc/self/maps") as maps:
                for line in maps:
                    if line.rstrip().endswith(real):
                        base = int(line.split("-", 1)[0], 16)
                        break
            count = 0
            with open("/proc/self/pagemap", "rb") as pagemap, open("/proc/kpageflags", "rb") as flags:
                for page in range((size + PAGE - 1) // PAGE):
                    pagemap.seek((base // PAGE + page) * 8)
                    entry = struct.unpack("Q", pagemap.read(8))[0]
                    frame = entry & ((1 << 55) - 1)
                    if not entry >> 63 or frame == 0:  # not present, or frames hidden (not root)
                        return None
                    flags.seek(frame * 8)
                    if not struct.unpack("Q", flags.read(8))[0] & TAIL:
                        count += 1
            return count
        finally:
            mapping.close()


for path in sys.argv[1:]:
    try:
        count = folios(path)
    except OSError:
        count = None
    print(f"{path}: {'unknown' if count is None else count} folios")
