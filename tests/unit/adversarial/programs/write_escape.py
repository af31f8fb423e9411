# Writes outside its work directory: /tmp, /var/tmp and the home directory stay untouched.
# killed_by: None
# returncode: 0
# stdout-not: wrote
# absent: /tmp/redraft-adversarial-escape /var/tmp/redraft-adversarial-escape /root/redraft-adversarial-escape
for target in [
    "/tmp/redraft-adversarial-escape",
    "/var/tmp/redraft-adversarial-escape",
    "/root/redraft-adversarial-escape",
]:
    try:
        with open(target, "w") as f:
            f.write("escaped")
        print("wrote", target)
    except OSError as exc:
        print("blocked", target, type(exc).__name__)
