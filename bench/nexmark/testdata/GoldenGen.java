// GoldenGen writes the golden files of the Go generator's cross-language
// test, using the JVM's own java.util.Random, Math.pow and Math.round. It
// restates the rules of Beam's Nexmark generator (GeneratorConfig defaults,
// constant rate of 10,000 events/s, one timeline, firstEventId 0) and the
// Go package's documented channel extension, in the Go package's JSON dump
// format.
//
// Regenerate (needs a JDK; the Go tests only read the outputs):
//
//	cd bench/nexmark/testdata && java GoldenGen.java lines > golden_events.jsonl
//	java GoldenGen.java crc 200000 > golden_crc.txt
//	java GoldenGen.java random > golden_random.txt
import java.util.Random;
import java.util.zip.CRC32;
import java.nio.charset.StandardCharsets;

public class GoldenGen {
  static final long BASE_TIME = 1436918400000L;
  static final long DELAY_US = (1_000_000L + 10_000 / 2) / 10_000;
  static final String[] STATES = {"AZ", "CA", "ID", "OR", "WA", "WY"};
  static final String[] CITIES = {"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"};
  static final String[] FIRST = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"};
  static final String[] LAST = {"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"};
  static final String[] HOT = {"Google", "Facebook", "Baidu", "Apple"};
  static String[] chanName = new String[10004];
  static String[] chanUrl = new String[10004];

  static String str(Random r, int max, char special) {
    int len = 3 + r.nextInt(max - 3);
    StringBuilder sb = new StringBuilder();
    while (len-- > 0) {
      if (r.nextInt(13) == 0) sb.append(special);
      else sb.append((char) ('a' + r.nextInt(26)));
    }
    return sb.toString().trim();
  }

  static String exact(Random r, int length) {
    StringBuilder sb = new StringBuilder();
    int rnd = 0, n = 0;
    while (length-- > 0) {
      if (n == 0) { rnd = r.nextInt(); n = 6; }
      sb.append((char) ('a' + rnd % 26));
      rnd /= 26;
      n--;
    }
    return sb.toString();
  }

  static String extra(Random r, int cur, int avg) {
    if (cur > avg) return "";
    avg -= cur;
    int delta = (int) Math.round(avg * 0.2);
    int min = avg - delta;
    int size = min + (delta == 0 ? 0 : r.nextInt(2 * delta));
    return exact(r, size);
  }

  static long nextLong(Random r, long n) {
    if (n < Integer.MAX_VALUE) return r.nextInt((int) n);
    return Math.abs(r.nextLong() % n);
  }

  static long price(Random r) { return Math.round(Math.pow(10.0, r.nextDouble() * 6.0) * 100.0); }

  static long lastPerson(long id) {
    long epoch = id / 50, off = id % 50;
    if (off >= 1) off = 0;
    return epoch + off;
  }

  static long lastAuction(long id) {
    long epoch = id / 50, off = id % 50;
    if (off < 1) { epoch--; off = 2; } else if (off >= 4) { off = 2; } else { off -= 1; }
    return epoch * 3 + off;
  }

  static long randPerson(long id, Random r) {
    long num = lastPerson(id) + 1;
    long active = Math.min(num, 1000);
    return num - active + nextLong(r, active + 10);
  }

  static long randAuction(long id, Random r) {
    long max = lastAuction(id);
    long min = Math.max(max - 100, 0);
    return min + nextLong(r, max - min + 1 + 10);
  }

  static long ts(long n) { return BASE_TIME + (n * DELAY_US) / 1000L; }

  static String q(String s) {
    StringBuilder sb = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') sb.append('\\').append(c);
      else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
      else sb.append(c);
    }
    return sb.append('"').toString();
  }

  static long splitmix64(long x) {
    x += 0x9E3779B97F4A7C15L;
    x = (x ^ (x >>> 30)) * 0xBF58476D1CE4E5B9L;
    x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
    return x ^ (x >>> 31);
  }

  static String baseUrl(Random r) {
    return "https://www.nexmark.com/" + str(r, 5, '_') + '/' + str(r, 5, '_') + '/' + str(r, 5, '_') + '/' + "item.htm?query=1";
  }

  static void buildChannels() {
    Random r = new Random(BASE_TIME);
    for (int i = 0; i < 4; i++) { chanName[10000 + i] = HOT[i]; chanUrl[10000 + i] = baseUrl(r); }
    for (int i = 0; i < 10000; i++) {
      String url = baseUrl(r);
      if (r.nextInt(10) > 0) url = url + "&channel_id=" + Math.abs(Integer.reverse(i));
      chanName[i] = "channel-" + i;
      chanUrl[i] = url;
    }
  }

  static String event(long id) {
    Random r = new Random(id);
    long t = ts(id);
    long rem = id % 50;
    if (rem < 1) {
      long pid = lastPerson(id) + 1000;
      String name = FIRST[r.nextInt(FIRST.length)] + " " + LAST[r.nextInt(LAST.length)];
      String email = str(r, 7, ' ') + "@" + str(r, 5, ' ') + ".com";
      StringBuilder cc = new StringBuilder();
      for (int i = 0; i < 4; i++) { if (i > 0) cc.append(' '); cc.append(String.format("%04d", r.nextInt(10000))); }
      String city = CITIES[r.nextInt(CITIES.length)];
      String state = STATES[r.nextInt(STATES.length)];
      int cur = 8 + name.length() + email.length() + cc.length() + city.length() + state.length();
      String x = extra(r, cur, 200);
      return "{\"type\":\"person\",\"id\":" + pid + ",\"name\":" + q(name) + ",\"email_address\":" + q(email)
          + ",\"credit_card\":" + q(cc.toString()) + ",\"city\":" + q(city) + ",\"state\":" + q(state)
          + ",\"date_time\":" + t + ",\"extra\":" + q(x) + "}";
    } else if (rem < 4) {
      long aid = lastAuction(id) + 1000;
      long seller;
      if (r.nextInt(4) > 0) seller = (lastPerson(id) / 100) * 100; else seller = randPerson(id, r);
      seller += 1000;
      long category = 10 + r.nextInt(5);
      long initial = price(r);
      long horizon = ts(id + (100L * 50) / 3) - t;
      long expires = t + 1L + nextLong(r, Math.max(horizon * 2, 1L));
      String name = str(r, 20, ' ');
      String desc = str(r, 100, ' ');
      long reserve = initial + price(r);
      int cur = 8 + name.length() + desc.length() + 8 + 8 + 8 + 8 + 8;
      String x = extra(r, cur, 500);
      return "{\"type\":\"auction\",\"id\":" + aid + ",\"item_name\":" + q(name) + ",\"description\":" + q(desc)
          + ",\"initial_bid\":" + initial + ",\"reserve\":" + reserve + ",\"date_time\":" + t
          + ",\"expires\":" + expires + ",\"seller\":" + seller + ",\"category\":" + category
          + ",\"extra\":" + q(x) + "}";
    } else {
      long auction;
      if (r.nextInt(2) > 0) auction = (lastAuction(id) / 100) * 100; else auction = randAuction(id, r);
      auction += 1000;
      long bidder;
      if (r.nextInt(4) > 0) bidder = (lastPerson(id) / 100) * 100 + 1; else bidder = randPerson(id, r);
      bidder += 1000;
      long p = price(r);
      String x = extra(r, 32, 100);
      Random cr = new Random(splitmix64(id));
      int ch = cr.nextInt(2) > 0 ? 10000 + cr.nextInt(4) : cr.nextInt(10000);
      return "{\"type\":\"bid\",\"auction\":" + auction + ",\"bidder\":" + bidder + ",\"price\":" + p
          + ",\"channel\":" + q(chanName[ch]) + ",\"url\":" + q(chanUrl[ch]) + ",\"date_time\":" + t
          + ",\"extra\":" + q(x) + "}";
    }
  }

  static void random() {
    long[] seeds = {0L, 1L, 42L, -1L, 1L << 47, Long.MIN_VALUE, Long.MAX_VALUE, 1436918400000L};
    int[] bounds = {1, 2, 7, 10, 13, 26, 100, 10000, (1 << 30) + 1, Integer.MAX_VALUE};
    for (long s : seeds) {
      Random r = new Random(s);
      StringBuilder sb = new StringBuilder("seed " + s);
      sb.append(" int ").append(r.nextInt());
      for (int b : bounds) sb.append(" int").append(b).append(' ').append(r.nextInt(b));
      sb.append(" long ").append(r.nextLong());
      sb.append(" double ").append(Double.doubleToRawLongBits(r.nextDouble()));
      sb.append(" bool ").append(r.nextBoolean());
      System.out.println(sb);
    }
  }

  public static void main(String[] args) {
    buildChannels();
    switch (args[0]) {
      case "lines":
        for (long id = 0; id < 400; id++) System.out.println(event(id));
        for (long id = 123_456_789L; id < 123_456_789L + 100; id++) System.out.println(event(id));
        for (long id = 7_000_000_000L; id < 7_000_000_000L + 100; id++) System.out.println(event(id));
        break;
      case "crc": {
        long n = Long.parseLong(args[1]);
        CRC32 crc = new CRC32();
        for (long id = 0; id < n; id++) crc.update((event(id) + "\n").getBytes(StandardCharsets.UTF_8));
        System.out.println(n + " " + Long.toHexString(crc.getValue()));
        break;
      }
      case "random":
        random();
        break;
    }
  }
}
