#!/usr/bin/env python3
"""Boots the RV64 guest in lockvisor mode under QEMU and OpenSBI and checks
what its programs leave in guest memory.

Lockvisor mode needs only a BootInfo named in /chosen (lockvisor/abi/
riscv_boot.h): here QEMU's own device tree gets the property
(fdt_set_chosen.py) and QEMU's generic loader puts a BootInfo written from the
ABI headers (write_boot_info.cpp) in RAM. OpenSBI serves none of lockvisor's
SBI calls, so the report channel's messages reach no VMM: each stays in its
hart's Ucall slot, where this script reads it through the QEMU monitor, with
the WorkloadStats the hart reported. That checks the guest's side of
lockvisor mode: the BootInfo accepted, the program it names dispatched on
every hart, the workload parameters checked, the workload run, and each
hart's last message.

Cases (4 harts):
  torture on ticket, 200 acquisitions per hart: every hart's last message
      is DONE with exit code 0; the acquisitions add up to 4 x 200 with no
      mutual-exclusion violation;
  pvqspinlock with SBI PVLOCK off: every hart fails its check ("needs SBI
      PVLOCK") before the workload starts;
  an unknown program: the boot hart fails ("unknown guest program");
  a lock tuning key (BootInfo::args) with a value that is no number: every
      hart fails its check naming it;
  a BootInfo for 5 harts on the 4 of the device tree: refused on the console
      before any program runs, then SRST power-off.

Usage: lockvisor_mode.py IMAGE WRITE_BOOT_INFO EMULATOR NM
  WRITE_BOOT_INFO is the riscv64 build of write_boot_info.cpp, run through
  EMULATOR (qemu-riscv64-static); NM reads the image's symbols.
Exit 0 when every case holds, 1 when not, 77 (skip) without
qemu-system-riscv64 or OpenSBI; under CI=true a skip is a failure.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fdt_set_chosen import add_property  # noqa: E402

FIRMWARE = "/usr/lib/riscv64-linux-gnu/opensbi/generic/fw_dynamic.bin"
HARTS = 4
ITERATIONS = 200
BOOT_INFO_GPA = 0x88000000  # RAM the image does not reach (it is linked at 0x80200000 and small)
LIMIT_S = 150
SLOTS = "_ZN5guest12_GLOBAL__N_17g_slotsE"  # runtime/ucall_report.cpp
STATS = "_ZN5guest5riscv12_GLOBAL__N_116g_workload_statsE"  # programs/riscv64_workloads.cpp


class Failure(Exception):
    pass


def symbols(nm, image):
    out = subprocess.run([nm, image], check=True, capture_output=True, text=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            table[parts[2]] = int(parts[0], 16)
    for name in (SLOTS, STATS):
        if name not in table:
            raise Failure(f"no symbol {name} in {image}")
    return table


class Monitor:
    """QEMU's human monitor on a unix socket: reads guest-physical memory."""

    def __init__(self, path, qemu):
        deadline = time.monotonic() + 20
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if qemu.poll() is not None:
                    raise Failure(f"QEMU exited ({qemu.returncode}) before its monitor came up")
                if time.monotonic() > deadline:
                    raise Failure("the QEMU monitor did not come up")
                time.sleep(0.1)
        self._until_prompt()

    def _until_prompt(self):
        data = b""
        while not data.endswith(b"(qemu) "):
            chunk = self.sock.recv(65536)
            if not chunk:
                raise Failure("the QEMU monitor closed")
            data += chunk
        return data.decode(errors="replace")

    def read(self, address, nbytes):
        """nbytes (a multiple of 8) of guest memory at address."""
        self.sock.sendall(f"xp /{nbytes // 8}xg {address:#x}\n".encode())
        words = []
        for line in self._until_prompt().splitlines():
            m = re.match(r"^\s*([0-9a-f]+):((?:\s+0x[0-9a-f]+)+)\s*$", line.strip("\r\x1b[K"))
            if m:
                words += [int(w, 16) for w in m.group(2).split()]
        if len(words) != nbytes // 8:
            raise Failure(f"the monitor returned {len(words)} words, not {nbytes // 8}")
        return b"".join(w.to_bytes(8, "little") for w in words)

    def quit(self):
        try:
            self.sock.sendall(b"quit\n")
        except OSError:
            pass
        self.sock.close()


def u32(blob, offset):
    return int.from_bytes(blob[offset:offset + 4], "little")


def u64(blob, offset):
    return int.from_bytes(blob[offset:offset + 8], "little")


# With a BootInfo the guest runs only if hart 0 entered first, as lockvisor's
# VMM makes it; OpenSBI draws lots for its boot hart, so a boot that drew
# another is refused with this message (riscv_boot.h) and booted again.
RISCV_BOOT_H = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "../../hypercalls/include/lockvisor/abi/riscv_boot.h")
BOOT_HART_MESSAGE = re.search(r'kRiscvBootHartMessage\[\] = "([^"]+)"', open(RISCV_BOOT_H).read()).group(1)
BOOT_DRAWS = 12


class Run:
    """One boot: the image with a BootInfo for `program` on `lock`, booted
    again (up to BOOT_DRAWS times) while OpenSBI picks a boot hart other than 0."""

    def __init__(self, ctx, program, lock, vcpus=HARTS, monitor=True, args=""):
        self.ctx = ctx
        work = ctx["work"]
        boot_info = os.path.join(work, "boot-info")
        subprocess.run([ctx["emulator"], ctx["writer"], boot_info, program, str(vcpus), lock, str(ITERATIONS), args],
                       check=True)
        for _ in range(BOOT_DRAWS):
            self.boot(boot_info)
            if not self.drew_another_boot_hart():
                # Connected only now: a boot that drew another hart powers
                # off at once, often before a monitor could be reached.
                if monitor:
                    self.monitor = Monitor(os.path.join(work, "monitor"), self.qemu)
                return
            self.close()
        raise Failure(f"OpenSBI never chose hart 0 to boot in {BOOT_DRAWS} boots")

    def drew_another_boot_hart(self):
        """Waits for the guest's banner or its refusal of a boot hart other than 0."""
        deadline = time.monotonic() + LIMIT_S
        while time.monotonic() < deadline:
            # Whether QEMU has exited is read before the console: a refusal
            # powers the machine off right after its message, so a console
            # read first could miss the message of a QEMU that then exits.
            exited = self.qemu.poll() is not None
            lines = self.console_tail()
            if any(BOOT_HART_MESSAGE in l for l in lines):
                return True
            if exited or any(l.startswith("lockvisor rv64 guest:") for l in lines):
                return False
            time.sleep(0.2)
        return False

    def boot(self, boot_info):
        work = self.ctx["work"]
        ctx = self.ctx
        sock = os.path.join(work, "monitor")
        if os.path.exists(sock):
            os.unlink(sock)
        self.console = open(os.path.join(work, "console"), "wb")
        self.qemu = subprocess.Popen(
            ctx["machine"] + ["-kernel", ctx["image"], "-dtb", ctx["dtb"],
                              "-device", f"loader,file={boot_info},addr={BOOT_INFO_GPA:#x},force-raw=on",
                              "-monitor", f"unix:{sock},server,nowait"],
            stdin=subprocess.DEVNULL, stdout=self.console, stderr=subprocess.STDOUT)
        self.monitor = None

    def slot(self, hart):
        L = self.ctx["layout"]
        return self.monitor.read(self.ctx["slots"] + hart * L["ucall_bytes"], L["ucall_bytes"])

    def last_messages(self, harts, want):
        """Polls until each of `harts` has a message of a type in `want`."""
        L = self.ctx["layout"]
        deadline = time.monotonic() + LIMIT_S
        while True:
            slots = {h: self.slot(h) for h in harts}
            if all(u32(s, L["ucall_type"]) in want for s in slots.values()):
                return slots
            if self.qemu.poll() is not None:
                raise Failure(f"QEMU exited ({self.qemu.returncode}) before every hart's last message")
            if time.monotonic() > deadline:
                late = {h: u32(s, L["ucall_type"]) for h, s in slots.items() if u32(s, L["ucall_type"]) not in want}
                raise Failure(f"not every hart sent its last message within {LIMIT_S} s: last message types {late}; "
                              f"console: {self.console_tail()}")
            time.sleep(0.5)

    def console_tail(self):
        self.console.flush()
        with open(os.path.join(self.ctx["work"], "console"), "rb") as f:
            return f.read().decode(errors="replace").replace("\r", "").splitlines()[-12:]

    def text(self, slot):
        L = self.ctx["layout"]
        raw = slot[L["ucall_text"]:L["ucall_text"] + L["ucall_text_bytes"]]
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    def close(self):
        if self.monitor is not None:
            self.monitor.quit()
        try:
            self.qemu.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.qemu.kill()
            self.qemu.wait()
        self.console.close()
        with open(os.path.join(self.ctx["work"], "console"), "rb") as f:
            lines = f.read().decode(errors="replace").replace("\r", "").splitlines()
        return [l for l in lines if l.startswith(("lockvisor rv64 guest:", "FAIL"))]


def expect_banner(lines):
    banner = f"lockvisor rv64 guest: {HARTS} harts, boot hart 0, lock clock 10000 kHz"
    if banner not in lines:
        raise Failure(f"no banner '{banner}' (console: {lines})")


def case_torture(ctx):
    L = ctx["layout"]
    run = Run(ctx, "torture", "ticket")
    try:
        slots = run.last_messages(range(HARTS), {L["ucall_done"], L["ucall_assert_fail"]})
        for h, s in slots.items():
            if u32(s, L["ucall_type"]) != L["ucall_done"]:
                raise Failure(f"hart {h} failed a check: {run.text(s)}")
            if u64(s, L["ucall_args"]) != 0:
                raise Failure(f"hart {h} reported DONE with exit code {u64(s, L['ucall_args'])}")
        ops = violations = 0
        for h in range(HARTS):
            stats = run.monitor.read(ctx["stats"] + h * L["stats_bytes"], L["stats_bytes"])
            ops += u64(stats, L["stats_ops"])
            violations += u64(stats, L["stats_violations"])
    finally:
        lines = run.close()
    expect_banner(lines)
    if ops != HARTS * ITERATIONS or violations != 0:
        raise Failure(f"torture: {ops} acquisitions (expected {HARTS * ITERATIONS}), {violations} violations")
    print(f"ok: torture on ticket, lockvisor mode: {HARTS} harts DONE, {ops} acquisitions, 0 violations")


def case_refused(ctx, program, lock, harts, expected, args=""):
    L = ctx["layout"]
    run = Run(ctx, program, lock, args=args)
    try:
        slots = run.last_messages(harts, {L["ucall_done"], L["ucall_assert_fail"]})
        texts = {h: run.text(s) for h, s in slots.items() if u32(s, L["ucall_type"]) == L["ucall_assert_fail"]}
    finally:
        run.close()
    for h in harts:
        if h not in texts or expected not in texts[h]:
            raise Failure(f"{program} on {lock}: hart {h} did not fail with '{expected}' ({texts.get(h, 'DONE')})")
    print(f"ok: {program} on {lock}: refused on harts {list(harts)}: {texts[harts[0]]}")


def case_more_vcpus_than_harts(ctx):
    """A BootInfo for more harts than the device tree has: refused on the
    console before any program runs, and the machine powers off (SRST)."""
    run = Run(ctx, "torture", "ticket", vcpus=HARTS + 1, monitor=False)
    try:
        run.qemu.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        raise Failure(f"a BootInfo for {HARTS + 1} harts on {HARTS}: the guest did not power off")
    finally:
        lines = run.close()
    expected = "BootInfo's vcpu_count is 0 or more than the harts the device tree describes"
    if not any(re.match(r"FAIL: hart [0-9]+: ", l) and expected in l for l in lines) or lines[-1:] != ["FAIL"]:
        raise Failure(f"a BootInfo for {HARTS + 1} harts on {HARTS} was not refused (console: {lines})")
    print(f"ok: a BootInfo for {HARTS + 1} harts on {HARTS}: refused")


def main(argv):
    if len(argv) != 5:
        print("usage: lockvisor_mode.py IMAGE WRITE_BOOT_INFO EMULATOR NM", file=sys.stderr)
        return 2
    image, writer, emulator, nm = argv[1:]
    if shutil.which("qemu-system-riscv64") is None or not os.path.isfile(FIRMWARE):
        if os.environ.get("CI") == "true":
            print(f"FAIL: no qemu-system-riscv64 or {FIRMWARE} under CI=true (tools/install-deps.sh)")
            return 1
        print(f"SKIP: needs qemu-system-riscv64 (qemu-system-misc) and {FIRMWARE} (opensbi)")
        return 77
    with tempfile.TemporaryDirectory() as work:
        machine = ["qemu-system-riscv64", "-M", "virt", "-cpu", "rv64", "-smp", str(HARTS), "-m", "256",
                   "-nographic", "-bios", FIRMWARE]
        try:
            table = symbols(nm, image)
            out = subprocess.run([emulator, writer, "--layout"], check=True, capture_output=True, text=True).stdout
            layout = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
            virt = os.path.join(work, "virt.dtb")
            subprocess.run(machine[:1] + ["-M", f"virt,dumpdtb={virt}"] + machine[3:], check=True,
                           capture_output=True)
            dtb = os.path.join(work, "chosen.dtb")
            with open(virt, "rb") as f:
                blob = add_property(f.read(), "lockvisor,boot-info", BOOT_INFO_GPA.to_bytes(8, "big"))
            with open(dtb, "wb") as f:
                f.write(blob)
            ctx = dict(work=work, machine=machine, image=image, writer=writer, emulator=emulator, dtb=dtb,
                       layout=layout, slots=table[SLOTS], stats=table[STATS])
            case_torture(ctx)
            case_refused(ctx, "torture", "pvqspinlock", list(range(HARTS)), "pvqspinlock needs SBI PVLOCK")
            case_refused(ctx, "no-such-program", "ticket", [0], "unknown guest program 'no-such-program'")
            case_refused(ctx, "torture", "pvbounded", list(range(HARTS)), "pvb_bound_us=soon is not a valid value",
                         args="pvb_bound_us=soon")
            case_more_vcpus_than_harts(ctx)
        except (Failure, subprocess.CalledProcessError, OSError, ValueError) as e:
            print(f"FAIL: {e}")
            return 1
    print("ok: lockvisor mode")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
